/*
 * vk_registry.inl - the Vulkan devices and their backend kind in the registry (backend.h).
 *
 * Devices are named by their loader index ("Vulkan0", "Vulkan1", ...), and listed with
 * the default device first (TSR_VULKAN_DEVICE, else the first discrete GPU, ...; read
 * when the registry first asks), so the kind's first device, init_by_name("vulkan"), is
 * the device tsr_backend_vk_init(-1) picks. A device whose Vulkan type is CPU (Mesa's
 * lavapipe) has the registry type CPU: its memory is host memory and it is slower than
 * the CPU backend, so tsr_backend_init_best and init_by_type(GPU) never take it; name it
 * to use it.
 */
namespace {
namespace tsr_vk {

struct registry_state {
    int n = 0;                                    /* devices listed */
    int order[TSR_VK_MAX_DEVICES] = {};           /* loader index of the i-th listed device */
    tsr_backend_device devs[TSR_VK_MAX_DEVICES] = {};   /* by loader index */
    char names[TSR_VK_MAX_DEVICES][24] = {};
    char descs[TSR_VK_MAX_DEVICES][320] = {};
};

static int dev_index(tsr_backend_dev_t dev) { return static_cast<int>(reinterpret_cast<intptr_t>(dev->context)); }

static registry_state & reg_state();
static tsr_backend_reg_t the_reg();

static const char * dev_get_name(tsr_backend_dev_t dev) { return reg_state().names[dev_index(dev)]; }
static const char * dev_get_description(tsr_backend_dev_t dev) { return reg_state().descs[dev_index(dev)]; }

static void dev_get_memory(tsr_backend_dev_t dev, size_t * free, size_t * total) {
    if (!tsr_backend_vk_get_device_memory(dev_index(dev), free, total)) *free = *total = 0;
}
static enum tsr_backend_dev_type dev_get_type(tsr_backend_dev_t dev) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(inst_state().phys[static_cast<size_t>(dev_index(dev))], &p);
    return p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? TSR_BACKEND_DEVICE_TYPE_CPU : TSR_BACKEND_DEVICE_TYPE_GPU;
}
static tsr_backend_t dev_init_backend(tsr_backend_dev_t dev, const char * params) {
    if (params && *params) {
        tsr_set_error("Vulkan device %s: params '%s' not understood (it takes none)", dev_get_name(dev), params);
        return nullptr;
    }
    return tsr_backend_vk_init(dev_index(dev));
}
static tsr_backend_buffer_type_t dev_get_buffer_type(tsr_backend_dev_t dev) { return tsr_backend_vk_buffer_type(dev_index(dev)); }
static bool dev_supports_op(tsr_backend_dev_t dev, const tsr_tensor * op) {
    device * d = get_device(dev_index(dev));
    return d && device_supports_op(d, op);
}
static bool dev_supports_buft(tsr_backend_dev_t dev, tsr_backend_buffer_type_t buft) {
    device * d = get_device(dev_index(dev));
    return d && device_supports_buft(d, buft);
}
static bool dev_offload_op(tsr_backend_dev_t dev, const tsr_tensor * op) {
    return tsr_backend_offload_by_batch(op) && dev_supports_op(dev, op);
}

static tsr_backend_event_t dev_event_new(tsr_backend_dev_t dev) {
    device * d = get_device(dev_index(dev));
    return d ? device_event_new(d) : nullptr;
}
static void dev_event_free(tsr_backend_dev_t, tsr_backend_event_t event) { device_event_free(event); }
static void dev_event_synchronize(tsr_backend_dev_t, tsr_backend_event_t event) { device_event_synchronize(event); }
static tsr_backend_buffer_t dev_buffer_from_host_ptr(tsr_backend_dev_t dev, void * ptr, size_t size, size_t max_tensor_size) {
    device * d = get_device(dev_index(dev));
    return d ? buffer_from_host_ptr(d, ptr, size, max_tensor_size) : nullptr;
}
/* What the tables cannot tell: graphs are queued (graph_compute_async), and whether the
 * driver imports host memory. */
static void dev_get_props(tsr_backend_dev_t dev, struct tsr_backend_dev_props * props) {
    device * d = get_device(dev_index(dev));
    props->caps.async = true;
    props->caps.buffer_from_host_ptr = d && d->host_import_align > 0;
}

static const char * reg_get_name(tsr_backend_reg_t) { return "Vulkan"; }
static size_t reg_get_device_count(tsr_backend_reg_t) { return static_cast<size_t>(reg_state().n); }
static tsr_backend_dev_t reg_get_device(tsr_backend_reg_t, size_t i) {
    registry_state & st = reg_state();
    return &st.devs[st.order[i]];
}

/* Filled member by member (each entry names its member); what is left out is NULL. */
static struct tsr_backend_reg g_reg = [] {
    struct tsr_backend_reg r = {};
    r.api_version = TSR_BACKEND_API_VERSION;
    r.iface.get_name = reg_get_name;
    r.iface.get_device_count = reg_get_device_count;
    r.iface.get_device = reg_get_device;
    return r;
}();
static tsr_backend_reg_t the_reg() { return &g_reg; }

/* One table for every Vulkan device: the context tells them apart (the loader index). */
static constexpr tsr_backend_device_i device_iface = [] {
    tsr_backend_device_i i = {};
    i.get_name = dev_get_name;
    i.get_description = dev_get_description;
    i.get_memory = dev_get_memory;
    i.get_type = dev_get_type;
    i.init_backend = dev_init_backend;
    i.get_buffer_type = dev_get_buffer_type;
    i.supports_op = dev_supports_op;
    i.supports_buft = dev_supports_buft;
    i.offload_op = dev_offload_op;
    i.get_props = dev_get_props;
    i.buffer_from_host_ptr = dev_buffer_from_host_ptr;
    i.event_new = dev_event_new;
    i.event_free = dev_event_free;
    i.event_synchronize = dev_event_synchronize;
    return i;
}();

static registry_state make_registry_state() {
    registry_state st;
    const int n = device_count();
    const int def = n > 0 ? default_device_index() : -1;   /* a bad TSR_VULKAN_DEVICE: loader order */
    if (def >= 0) st.order[st.n++] = def;
    for (int i = 0; i < n; i++) {
        if (i != def) st.order[st.n++] = i;
        snprintf(st.names[i], sizeof st.names[i], "Vulkan%d", i);
        if (!tsr_backend_vk_get_device_description(i, st.descs[i], sizeof st.descs[i])) snprintf(st.descs[i], sizeof st.descs[i], "?");
        st.devs[i] = tsr_backend_device{device_iface, the_reg(), reinterpret_cast<void *>(static_cast<intptr_t>(i))};
    }
    return st;
}

/* Built on the first question (creating the Vulkan instance), never at static init. */
static registry_state & reg_state() {
    static registry_state st = make_registry_state();
    return st;
}

static tsr_backend_dev_t registry_device(int index) {
    registry_state & st = reg_state();
    return index >= 0 && index < TSR_VK_MAX_DEVICES && st.devs[index].reg ? &st.devs[index] : nullptr;
}

/* Registered while this file's statics are initialized (see registry.inl); the device
 * list itself waits for the first question. */
[[maybe_unused]] static const bool g_registered = tsr_backend_register(&g_reg);

} // namespace tsr_vk
} // namespace

TSR_API_IMPL tsr_backend_reg_t tsr_backend_vk_reg(void) { return &tsr_vk::g_reg; }
