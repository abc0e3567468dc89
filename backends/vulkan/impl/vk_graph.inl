/*
 * vk_graph.inl - the backend: a whole graph recorded into one command buffer, pipeline
 * barriers only where a dispatch reads or writes what an earlier one since the last
 * barrier wrote (or writes what it read), one submit per graph. graph_compute waits for
 * the backend's fence; graph_compute_async leaves the graph in flight until synchronize
 * (or the next graph, which reuses the command buffer and descriptor sets). Events are
 * fences submitted behind the device queue's work.
 */
namespace {
namespace tsr_vk {

struct range { VkBuffer buf; size_t lo, hi; };

static const size_t SETS_PER_POOL = 256;
static const size_t MAX_TRACKED = 256;

struct backend_ctx {
    device * d = nullptr;
    std::string name;
    mode m = M_RECORD;
    VkCommandPool pool = VK_NULL_HANDLE;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    bool in_flight = false;   /* cb submitted with `fence`, not waited for yet */
    std::vector<VkDescriptorPool> dpools;
    std::vector<VkDescriptorSet> sets;
    size_t n_used = 0;        /* sets used by the graph being recorded */
    size_t n_counted = 0;     /* dispatches counted (M_COUNT) */
    bool make_pipelines = false;  /* M_CHECK from graph_reserve: create the pipelines ahead */
    std::vector<range> reads, writes;   /* since the last barrier */
    tsr_vk_graph_stats stats{};
};

static device * ctx_device(backend_ctx * ctx) { return ctx->d; }
static mode ctx_mode(backend_ctx * ctx) { return ctx->m; }

/* Make sure at least n descriptor sets exist (allocates pools of SETS_PER_POOL). */
static bool ensure_sets(backend_ctx * ctx, size_t n) {
    device * d = ctx->d;
    if (ctx->sets.size() >= n) return true;
    std::vector<VkDescriptorSetLayout> layouts;
    try {  /* grow the host vectors first: nothing below may throw out of the API */
        const size_t n_pools = (n - ctx->sets.size() + SETS_PER_POOL - 1) / SETS_PER_POOL;
        ctx->dpools.reserve(ctx->dpools.size() + n_pools);
        ctx->sets.reserve(ctx->sets.size() + n_pools * SETS_PER_POOL);
        layouts.assign(SETS_PER_POOL, d->dsl);
    } catch (...) {
        return tsr_set_error("Vulkan %s: out of host memory for %zu descriptor sets", d->name.c_str(), n);
    }
    while (ctx->sets.size() < n) {
        VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(SETS_PER_POOL * N_BINDINGS)};
        VkDescriptorPoolCreateInfo pci{};
        pci.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
        pci.maxSets = static_cast<uint32_t>(SETS_PER_POOL);
        pci.poolSizeCount = 1;
        pci.pPoolSizes = &ps;
        VkDescriptorPool pool = VK_NULL_HANDLE;
        VkResult r = vkCreateDescriptorPool(d->dev, &pci, nullptr, &pool);
        if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: vkCreateDescriptorPool failed (%s)", d->name.c_str(), vk_result_str(r));
        ctx->dpools.push_back(pool);  /* reserved above: cannot throw */
        VkDescriptorSetAllocateInfo ai{};
        ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
        ai.descriptorPool = pool;
        ai.descriptorSetCount = static_cast<uint32_t>(SETS_PER_POOL);
        ai.pSetLayouts = layouts.data();
        size_t at = ctx->sets.size();
        ctx->sets.resize(at + SETS_PER_POOL);
        r = vkAllocateDescriptorSets(d->dev, &ai, ctx->sets.data() + at);
        if (r != VK_SUCCESS) {
            ctx->sets.resize(at);
            return tsr_set_error("Vulkan %s: vkAllocateDescriptorSets failed (%s)", d->name.c_str(), vk_result_str(r));
        }
    }
    return true;
}

static bool overlaps(const std::vector<range> & v, const range & r) {
    for (const range & x : v)
        if (x.buf == r.buf && x.lo < r.hi && r.lo < x.hi) return true;
    return false;
}

static void barrier(backend_ctx * ctx) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(ctx->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0,
                         nullptr, 0, nullptr);
    ctx->reads.clear();
    ctx->writes.clear();
    ctx->stats.n_barriers++;
}

static bool emit(backend_ctx * ctx, int sh, uint32_t spec, const bind * b, const uint32_t * pc,
                 uint32_t gx, uint32_t gy, uint32_t gz) {
    if (ctx->m == M_CHECK) return !ctx->make_pipelines || get_pipeline(ctx->d, sh, spec) != VK_NULL_HANDLE;
    if (ctx->m == M_COUNT) { ctx->n_counted++; return true; }
    if (gx == 0 || gy == 0 || gz == 0) return true;
    device * d = ctx->d;
    VkPipeline p = get_pipeline(d, sh, spec);
    if (!p) return false;
    if (!ensure_sets(ctx, ctx->n_used + 1)) return false;
    VkDescriptorSet set = ctx->sets[ctx->n_used++];

    /* hazards: read-after-write, write-after-write, write-after-read */
    range rr[4];
    int n_r = 0;
    for (int s : {0, 1, 2, 4}) if (b[s].buf != d->dummy) rr[n_r++] = range{b[s].buf, b[s].off, b[s].off + b[s].range};
    range w{b[3].buf, b[3].off, b[3].off + b[3].range};
    bool need = overlaps(ctx->writes, w) || overlaps(ctx->reads, w);
    for (int i = 0; i < n_r && !need; i++) need = overlaps(ctx->writes, rr[i]);
    if (need || ctx->reads.size() + 4 > MAX_TRACKED || ctx->writes.size() + 1 > MAX_TRACKED) barrier(ctx);
    for (int i = 0; i < n_r; i++) ctx->reads.push_back(rr[i]);
    ctx->writes.push_back(w);

    VkDescriptorBufferInfo bi[N_BINDINGS];
    VkWriteDescriptorSet wr[N_BINDINGS];
    for (uint32_t i = 0; i < N_BINDINGS; i++) {
        bi[i] = VkDescriptorBufferInfo{b[i].buf, b[i].off, b[i].range};
        wr[i] = VkWriteDescriptorSet{};
        wr[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        wr[i].dstSet = set;
        wr[i].dstBinding = i;
        wr[i].descriptorCount = 1;
        wr[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        wr[i].pBufferInfo = &bi[i];
    }
    vkUpdateDescriptorSets(d->dev, N_BINDINGS, wr, 0, nullptr);
    vkCmdBindPipeline(ctx->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    vkCmdBindDescriptorSets(ctx->cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &set, 0, nullptr);
    vkCmdPushConstants(ctx->cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, PC_SIZE, pc);
    vkCmdDispatch(ctx->cb, gx, gy, gz);
    ctx->stats.n_dispatches++;
    return true;
}

/* ---- backend interface ------------------------------------------------------------------ */

static const char * be_get_name(tsr_backend_t be) { return static_cast<backend_ctx *>(be->context)->name.c_str(); }

static void be_free(tsr_backend_t be) {
    backend_ctx * ctx = static_cast<backend_ctx *>(be->context);
    if (ctx) {
        device * d = ctx->d;
        {
            std::lock_guard<std::recursive_mutex> lock(d->mutex);  /* the queue is shared */
            vkQueueWaitIdle(d->queue);
        }
        for (VkDescriptorPool p : ctx->dpools) vkDestroyDescriptorPool(d->dev, p, nullptr);
        if (ctx->fence) vkDestroyFence(d->dev, ctx->fence, nullptr);
        if (ctx->pool) vkDestroyCommandPool(d->dev, ctx->pool, nullptr);
        delete ctx;
    }
    delete be;
}

static tsr_backend_buffer_type_t be_get_default_buffer_type(tsr_backend_t be) {
    return &static_cast<backend_ctx *>(be->context)->d->buft;
}

/* Count the dispatches of a graph, create its pipelines and descriptor sets ahead. */
static bool be_graph_reserve(tsr_backend_t be, tsr_cgraph * g) {
    backend_ctx * ctx = static_cast<backend_ctx *>(be->context);
    ctx->m = M_CHECK;
    ctx->make_pipelines = true;
    const int n = tsr_graph_n_nodes(g);
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = encode_node(ctx, tsr_graph_node(g, i));
    ctx->m = M_RECORD;
    ctx->make_pipelines = false;
    ctx->stats.n_pipelines = ctx->d->n_pipelines;
    if (!ok) return false;
    /* a generous estimate: chunked dispatches are rare, so 2 per node */
    return ensure_sets(ctx, static_cast<size_t>(2 * n + 16));
}

/* Wait for the graph in flight (its command buffer and descriptor sets become free). */
static bool wait_in_flight(backend_ctx * ctx) {
    if (!ctx->in_flight) return true;
    device * d = ctx->d;
    const VkResult r = vkWaitForFences(d->dev, 1, &ctx->fence, VK_TRUE, UINT64_MAX);
    vkResetFences(d->dev, 1, &ctx->fence);
    ctx->in_flight = false;
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: waiting for a graph failed (%s)", d->name.c_str(), vk_result_str(r));
    return true;
}

static void be_synchronize(tsr_backend_t be) { wait_in_flight(static_cast<backend_ctx *>(be->context)); }

/* The access a graph's dispatches may have to wait for: the host's and transfers' writes,
 * and the shader writes of graphs submitted before it on the queue without a wait. */
static void barrier_before_graph(backend_ctx * ctx) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
    vkCmdPipelineBarrier(ctx->cb, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
}

/* Record and submit a graph; it is in flight until wait_in_flight. */
static enum tsr_status be_graph_compute_async(tsr_backend_t be, tsr_cgraph * g) {
    backend_ctx * ctx = static_cast<backend_ctx *>(be->context);
    device * d = ctx->d;
    if (!wait_in_flight(ctx)) return TSR_STATUS_FAILED;
    const int n = tsr_graph_n_nodes(g);
    ctx->stats = tsr_vk_graph_stats{};
    ctx->stats.n_nodes = n;
    /* count first, so descriptor sets exist before recording starts */
    ctx->m = M_COUNT;
    ctx->n_counted = 0;
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = encode_node(ctx, tsr_graph_node(g, i));
    ctx->m = M_RECORD;
    if (!ok) return TSR_STATUS_FAILED;
    if (ctx->n_counted == 0) return TSR_STATUS_SUCCESS;
    if (!ensure_sets(ctx, ctx->n_counted)) return TSR_STATUS_ALLOC_FAILED;

    std::lock_guard<std::recursive_mutex> lock(d->mutex);  /* the queue is shared with transfers */
    VkResult r = vkResetCommandBuffer(ctx->cb, 0);
    VkCommandBufferBeginInfo cbi{};
    cbi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    cbi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (r == VK_SUCCESS) r = vkBeginCommandBuffer(ctx->cb, &cbi);
    if (r != VK_SUCCESS) { tsr_set_error("Vulkan %s: vkBeginCommandBuffer failed (%s)", d->name.c_str(), vk_result_str(r)); return TSR_STATUS_FAILED; }
    ctx->n_used = 0;
    ctx->reads.clear();
    ctx->writes.clear();
    barrier_before_graph(ctx);
    for (int i = 0; i < n && ok; i++) ok = encode_node(ctx, tsr_graph_node(g, i));
    {
        VkMemoryBarrier mb{};
        mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
        mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT;
        vkCmdPipelineBarrier(ctx->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             0, 1, &mb, 0, nullptr, 0, nullptr);
    }
    r = vkEndCommandBuffer(ctx->cb);
    if (!ok) return TSR_STATUS_FAILED;
    if (r != VK_SUCCESS) { tsr_set_error("Vulkan %s: vkEndCommandBuffer failed (%s)", d->name.c_str(), vk_result_str(r)); return TSR_STATUS_FAILED; }
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &ctx->cb;
    r = vkQueueSubmit(d->queue, 1, &si, ctx->fence);
    ctx->stats.n_pipelines = d->n_pipelines;
    if (r != VK_SUCCESS) { tsr_set_error("Vulkan %s: graph submit failed (%s)", d->name.c_str(), vk_result_str(r)); return TSR_STATUS_FAILED; }
    ctx->stats.n_submits++;
    ctx->in_flight = true;
    return TSR_STATUS_SUCCESS;
}

static enum tsr_status be_graph_compute(tsr_backend_t be, tsr_cgraph * g) {
    const enum tsr_status st = be_graph_compute_async(be, g);
    if (st != TSR_STATUS_SUCCESS) return st;
    return wait_in_flight(static_cast<backend_ctx *>(be->context)) ? TSR_STATUS_SUCCESS : TSR_STATUS_FAILED;
}

/* Copies ordered after the graph in flight: it may read or write the same memory, and on
 * unified memory (lavapipe) the copy is the host's memcpy. */
static bool be_set_tensor_async(tsr_backend_t be, tsr_tensor * t, const void * data, size_t offset, size_t size) {
    return wait_in_flight(static_cast<backend_ctx *>(be->context)) && tsr_backend_tensor_set(t, data, offset, size);
}
static bool be_get_tensor_async(tsr_backend_t be, const tsr_tensor * t, void * data, size_t offset, size_t size) {
    return wait_in_flight(static_cast<backend_ctx *>(be->context)) && tsr_backend_tensor_get(t, data, offset, size);
}

/* ---- events: a fence submitted behind everything queued on the device ---------------------- */

struct event_ctx {
    device * d = nullptr;
    VkFence fence = VK_NULL_HANDLE;
    bool pending = false;   /* submitted, not waited for */
};

static bool event_sync(event_ctx * ev) {
    if (!ev->pending) return true;
    const VkResult r = vkWaitForFences(ev->d->dev, 1, &ev->fence, VK_TRUE, UINT64_MAX);
    vkResetFences(ev->d->dev, 1, &ev->fence);
    ev->pending = false;
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: waiting for an event failed (%s)", ev->d->name.c_str(), vk_result_str(r));
    return true;
}

static tsr_backend_event_t device_event_new(device * d) {
    std::unique_ptr<event_ctx> ev(new (std::nothrow) event_ctx());
    tsr_backend_event_t event = ev ? new (std::nothrow) tsr_backend_event() : nullptr;
    if (!event) { tsr_set_error("Vulkan %s: out of host memory for an event", d->name.c_str()); return nullptr; }
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    const VkResult r = vkCreateFence(d->dev, &fci, nullptr, &ev->fence);
    if (r != VK_SUCCESS) {
        delete event;
        tsr_set_error("Vulkan %s: vkCreateFence for an event failed (%s)", d->name.c_str(), vk_result_str(r));
        return nullptr;
    }
    ev->d = d;
    event->context = ev.release();
    return event;
}

static void device_event_free(tsr_backend_event_t event) {
    event_ctx * ev = static_cast<event_ctx *>(event->context);
    event_sync(ev);
    vkDestroyFence(ev->d->dev, ev->fence, nullptr);
    delete ev;
    delete event;
}

static void device_event_synchronize(tsr_backend_event_t event) { event_sync(static_cast<event_ctx *>(event->context)); }

/* A submit without command buffers signals its fence once all work queued before it is done. */
static bool be_event_record(tsr_backend_t be, tsr_backend_event_t event) {
    event_ctx * ev = static_cast<event_ctx *>(event->context);
    device * d = static_cast<backend_ctx *>(be->context)->d;
    if (!event_sync(ev)) return false;
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    const VkResult r = vkQueueSubmit(d->queue, 0, nullptr, ev->fence);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: recording an event failed (%s)", d->name.c_str(), vk_result_str(r));
    ev->pending = true;
    return true;
}

/* Work on the event's own queue is ordered behind it already (each graph starts with a
 * barrier against earlier writes); another device's event is waited for on the host. */
static bool be_event_wait(tsr_backend_t be, tsr_backend_event_t event) {
    event_ctx * ev = static_cast<event_ctx *>(event->context);
    if (ev->d == static_cast<backend_ctx *>(be->context)->d) return true;
    return event_sync(ev);
}

/* Whether a device runs op: a check-mode pass over a context of its own, so the device
 * layer answers without a backend and a backend's answer cannot differ from its device's. */
static bool device_supports_op(device * d, const tsr_tensor * op) {
    backend_ctx probe;
    probe.d = d;
    probe.m = M_CHECK;
    return encode_node(&probe, op);
}
static bool device_supports_buft(const device * d, tsr_backend_buffer_type_t buft) { return buft == &d->buft; }

static bool be_supports_op(tsr_backend_t be, const tsr_tensor * op) {
    return device_supports_op(static_cast<backend_ctx *>(be->context)->d, op);
}

static bool be_supports_buft(tsr_backend_t be, tsr_backend_buffer_type_t buft) {
    return device_supports_buft(static_cast<backend_ctx *>(be->context)->d, buft);
}

/* The registry's device of a loader index (vk_registry.inl). */
static tsr_backend_dev_t registry_device(int index);

/* Filled member by member: each entry names its member; the optional ones left NULL. */
static constexpr tsr_backend_i backend_iface = [] {
    tsr_backend_i i = {};
    i.get_name = be_get_name;
    i.free = be_free;
    i.get_default_buffer_type = be_get_default_buffer_type;
    i.set_tensor_async = be_set_tensor_async;
    i.get_tensor_async = be_get_tensor_async;
    i.synchronize = be_synchronize;
    i.graph_reserve = be_graph_reserve;
    i.graph_compute = be_graph_compute;
    i.graph_compute_async = be_graph_compute_async;
    i.event_record = be_event_record;
    i.event_wait = be_event_wait;
    i.supports_op = be_supports_op;
    i.supports_buft = be_supports_buft;
    return i;
}();

} // namespace tsr_vk
} // namespace

TSR_API_IMPL tsr_backend_t tsr_backend_vk_init(int device) {
    tsr_vk::device * d = tsr_vk::get_device(device);
    if (!d) return nullptr;
    std::unique_ptr<tsr_vk::backend_ctx> ctx(new (std::nothrow) tsr_vk::backend_ctx());
    if (!ctx) { tsr_set_error("tsr_backend_vk_init: out of host memory"); return nullptr; }
    ctx->d = d;
    try {
        ctx->name = d->name;
        ctx->reads.reserve(tsr_vk::MAX_TRACKED);  /* emit() never lets these grow past MAX_TRACKED */
        ctx->writes.reserve(tsr_vk::MAX_TRACKED);
    } catch (...) {
        tsr_set_error("tsr_backend_vk_init: out of host memory");
        return nullptr;
    }
    VkCommandPoolCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = d->qfam;
    VkResult r = vkCreateCommandPool(d->dev, &pci, nullptr, &ctx->pool);
    if (r == VK_SUCCESS) {
        VkCommandBufferAllocateInfo ai{};
        ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
        ai.commandPool = ctx->pool;
        ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        ai.commandBufferCount = 1;
        r = vkAllocateCommandBuffers(d->dev, &ai, &ctx->cb);
    }
    if (r == VK_SUCCESS) {
        VkFenceCreateInfo fci{};
        fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
        r = vkCreateFence(d->dev, &fci, nullptr, &ctx->fence);
    }
    tsr_backend_t be = new (std::nothrow) tsr_backend();
    if (be) {
        be->iface = tsr_vk::backend_iface;
        be->device = tsr_vk::registry_device(d->index);
        be->context = ctx.get();
    }
    if (r != VK_SUCCESS || !be) {
        if (ctx->fence) vkDestroyFence(d->dev, ctx->fence, nullptr);
        if (ctx->pool) vkDestroyCommandPool(d->dev, ctx->pool, nullptr);
        delete be;
        tsr_set_error("Vulkan %s: creating the command pool/buffer/fence failed (%s)", d->name.c_str(), tsr_vk::vk_result_str(r));
        return nullptr;
    }
    ctx.release();
    return be;
}

TSR_API_IMPL bool tsr_backend_is_vk(tsr_backend_t backend) {
    return backend && backend->iface.get_name == tsr_vk::be_get_name;
}

TSR_API_IMPL struct tsr_vk_graph_stats tsr_backend_vk_get_graph_stats(tsr_backend_t backend) {
    if (!tsr_backend_is_vk(backend)) return tsr_vk_graph_stats{};
    return static_cast<tsr_vk::backend_ctx *>(backend->context)->stats;
}
