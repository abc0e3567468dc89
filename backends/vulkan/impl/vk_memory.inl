/*
 * vk_memory.inl - device memory: memory type selection, buffers (one VkBuffer over one
 * VkDeviceMemory block, tensors sub-allocated in it at minStorageBufferOffsetAlignment),
 * host-visible staging for tensor_set/get, the unified (mapped) path, the buffer type.
 */
namespace {
namespace tsr_vk {

static const VkMemoryPropertyFlags MEM_DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
static const VkMemoryPropertyFlags MEM_HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
static const VkMemoryPropertyFlags MEM_HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
static const VkMemoryPropertyFlags MEM_CACHED = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;

/* First memory type allowed by `bits` that has all flags of prefs[0], else prefs[1], ...
 * and whose heap can hold `size`. -1 when none. */
static int pick_memory_type(const device * d, uint32_t bits, const VkMemoryPropertyFlags * prefs, int n_prefs, size_t size) {
    for (int p = 0; p < n_prefs; p++) {
        for (uint32_t t = 0; t < d->memprops.memoryTypeCount; t++) {
            const VkMemoryType & mt = d->memprops.memoryTypes[t];
            if (!(bits & (1u << t))) continue;
            if ((mt.propertyFlags & prefs[p]) != prefs[p]) continue;
            if (d->memprops.memoryHeaps[mt.heapIndex].size < size) continue;
            return static_cast<int>(t);
        }
    }
    return -1;
}

static void free_vk_buffer(device * d, VkBuffer & buf, VkDeviceMemory & mem, void *& map) {
    if (map) { vkUnmapMemory(d->dev, mem); map = nullptr; }
    if (buf) { vkDestroyBuffer(d->dev, buf, nullptr); buf = VK_NULL_HANDLE; }
    if (mem) { vkFreeMemory(d->dev, mem, nullptr); mem = VK_NULL_HANDLE; }
}

/* Create a VkBuffer of `size` bytes bound to fresh memory chosen by prefs; map it when
 * the chosen type is host-visible and `want_map`. All or nothing: on failure every
 * object created so far is destroyed and false + an error naming the numbers returned. */
static bool make_vk_buffer(device * d, size_t size, const VkMemoryPropertyFlags * prefs, int n_prefs, bool want_map,
                           const char * what, VkBuffer & buf, VkDeviceMemory & mem, void *& map, bool * coherent) {
    buf = VK_NULL_HANDLE; mem = VK_NULL_HANDLE; map = nullptr;
    if (size > d->max_alloc) {
        return tsr_set_error("Vulkan %s: %s of %zu bytes exceeds the device's maximum allocation of %zu bytes",
                             d->name.c_str(), what, size, d->max_alloc);
    }
    VkBufferCreateInfo bci{};
    bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bci.size = std::max<size_t>(size, 16);
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vkCreateBuffer(d->dev, &bci, nullptr, &buf);
    if (r != VK_SUCCESS) {
        buf = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan %s: vkCreateBuffer for %s of %zu bytes failed (%s)", d->name.c_str(), what, size, vk_result_str(r));
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, buf, &req);
    int type = pick_memory_type(d, req.memoryTypeBits, prefs, n_prefs, static_cast<size_t>(req.size));
    if (type < 0) {
        vkDestroyBuffer(d->dev, buf, nullptr); buf = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan %s: no memory type for %s of %zu bytes (type bits 0x%x)", d->name.c_str(), what, size,
                             req.memoryTypeBits);
    }
    VkMemoryAllocateInfo mai{};
    mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = static_cast<uint32_t>(type);
    r = vkAllocateMemory(d->dev, &mai, nullptr, &mem);
    if (r != VK_SUCCESS) {
        mem = VK_NULL_HANDLE;
        vkDestroyBuffer(d->dev, buf, nullptr); buf = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan %s: vkAllocateMemory of %zu bytes for %s failed (%s, memory type %d)", d->name.c_str(),
                             static_cast<size_t>(req.size), what, vk_result_str(r), type);
    }
    r = vkBindBufferMemory(d->dev, buf, mem, 0);
    if (r != VK_SUCCESS) {
        free_vk_buffer(d, buf, mem, map);
        return tsr_set_error("Vulkan %s: vkBindBufferMemory for %s failed (%s)", d->name.c_str(), what, vk_result_str(r));
    }
    const VkMemoryPropertyFlags flags = d->memprops.memoryTypes[type].propertyFlags;
    if (coherent) *coherent = (flags & MEM_HC) != 0;
    if (want_map && (flags & MEM_HV)) {
        r = vkMapMemory(d->dev, mem, 0, VK_WHOLE_SIZE, 0, &map);
        if (r != VK_SUCCESS) {
            map = nullptr;
            free_vk_buffer(d, buf, mem, map);
            return tsr_set_error("Vulkan %s: vkMapMemory for %s failed (%s)", d->name.c_str(), what, vk_result_str(r));
        }
    }
    return true;
}

/* ---- transfers (device mutex held by callers) ------------------------------------------ */

static bool ensure_staging(device * d, size_t size) {
    if (d->stage.size >= size) return true;
    free_vk_buffer(d, d->stage.buf, d->stage.mem, d->stage.map);
    d->stage.size = 0;
    const VkMemoryPropertyFlags prefs[] = { MEM_HV | MEM_HC | MEM_CACHED, MEM_HV | MEM_HC, MEM_HV };
    if (!make_vk_buffer(d, size, prefs, 3, true, "staging buffer", d->stage.buf, d->stage.mem, d->stage.map, &d->stage.coherent))
        return false;
    if (!d->stage.map) {
        free_vk_buffer(d, d->stage.buf, d->stage.mem, d->stage.map);
        return tsr_set_error("Vulkan %s: staging memory is not host-visible", d->name.c_str());
    }
    d->stage.size = size;
    return true;
}

static bool xfer_begin(device * d) {
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    VkResult r = vkBeginCommandBuffer(d->xfer_cb, &bi);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: vkBeginCommandBuffer failed (%s)", d->name.c_str(), vk_result_str(r));
    return true;
}

/* End, submit and wait for the transfer command buffer. */
static bool xfer_submit_wait(device * d) {
    VkResult r = vkEndCommandBuffer(d->xfer_cb);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: vkEndCommandBuffer failed (%s)", d->name.c_str(), vk_result_str(r));
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &d->xfer_cb;
    r = vkQueueSubmit(d->queue, 1, &si, d->xfer_fence);
    if (r == VK_SUCCESS) r = vkWaitForFences(d->dev, 1, &d->xfer_fence, VK_TRUE, UINT64_MAX);
    vkResetFences(d->dev, 1, &d->xfer_fence);
    vkResetCommandBuffer(d->xfer_cb, 0);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: transfer submit failed (%s)", d->name.c_str(), vk_result_str(r));
    return true;
}

static const size_t STAGING_CHUNK = size_t(32) << 20;

/* Copy host -> device buffer (or device -> host when `to_host`) through staging. */
static bool staged_copy(device * d, VkBuffer dev_buf, size_t dev_off, void * host, size_t size, bool to_host) {
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    size_t chunk = std::min(size, STAGING_CHUNK);
    if (!ensure_staging(d, align_up(std::max<size_t>(chunk, 1), 256))) return false;
    for (size_t done = 0; done < size; done += chunk) {
        size_t n = std::min(chunk, size - done);
        if (!to_host) {
            memcpy(d->stage.map, static_cast<char *>(host) + done, n);
            if (!d->stage.coherent) {
                VkMappedMemoryRange mr{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, d->stage.mem, 0, VK_WHOLE_SIZE};
                vkFlushMappedMemoryRanges(d->dev, 1, &mr);
            }
        }
        if (!xfer_begin(d)) return false;
        VkBufferCopy c{};
        c.size = n;
        if (to_host) { c.srcOffset = dev_off + done; vkCmdCopyBuffer(d->xfer_cb, dev_buf, d->stage.buf, 1, &c); }
        else         { c.dstOffset = dev_off + done; vkCmdCopyBuffer(d->xfer_cb, d->stage.buf, dev_buf, 1, &c); }
        if (!xfer_submit_wait(d)) return false;
        if (to_host) {
            if (!d->stage.coherent) {
                VkMappedMemoryRange mr{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, d->stage.mem, 0, VK_WHOLE_SIZE};
                vkInvalidateMappedMemoryRanges(d->dev, 1, &mr);
            }
            memcpy(static_cast<char *>(host) + done, d->stage.map, n);
        }
    }
    return true;
}

/* ---- buffer interface -------------------------------------------------------------------- */

/* ---- sub-allocation from blocks ------------------------------------------------------------ */

static const size_t BLOCK_SIZE = size_t(64) << 20;

/* Return a region to its block; a block left empty is freed. Device mutex held. */
static void block_release(device * d, mem_block * blk, size_t off, size_t size) {
    auto & fl = blk->free;
    auto it = std::lower_bound(fl.begin(), fl.end(), std::make_pair(off, size_t(0)));
    bool inserted = true;
    try { it = fl.insert(it, std::make_pair(off, size)); } catch (...) { inserted = false; }  /* out of host memory: the region leaks */
    if (inserted) {
        if (it + 1 != fl.end() && it->first + it->second == (it + 1)->first) { it->second += (it + 1)->second; fl.erase(it + 1); }
        if (it != fl.begin() && (it - 1)->first + (it - 1)->second == it->first) { (it - 1)->second += it->second; fl.erase(it); }
    }
    if (--blk->n_regions == 0) {
        if (blk->map) vkUnmapMemory(d->dev, blk->mem);
        vkFreeMemory(d->dev, blk->mem, nullptr);
        d->blocks.erase(std::find(d->blocks.begin(), d->blocks.end(), blk));
        delete blk;
    }
}

/* Take `size` bytes aligned to `align` from a block of memory type `type` (mapped when
 * `mapped`), creating a block when none has room. false + error on failure. */
static bool block_acquire(device * d, uint32_t type, bool mapped, size_t size, size_t align, mem_block *& out, size_t & off) {
    for (mem_block * blk : d->blocks) {
        if (blk->type != type || (blk->map != nullptr) != mapped) continue;
        for (size_t i = 0; i < blk->free.size(); i++) {
            const size_t o = blk->free[i].first, s = blk->free[i].second;
            const size_t a = align_up(o, align);
            if (a + size > o + s) continue;
            /* one free range becomes at most two: reserve so the inserts below cannot throw */
            try { blk->free.reserve(blk->free.size() + 1); } catch (...) {
                return tsr_set_error("Vulkan %s: out of host memory for the free list", d->name.c_str());
            }
            blk->free.erase(blk->free.begin() + static_cast<std::ptrdiff_t>(i));
            if (a + size < o + s) blk->free.insert(blk->free.begin() + static_cast<std::ptrdiff_t>(i), std::make_pair(a + size, o + s - a - size));
            if (a > o) blk->free.insert(blk->free.begin() + static_cast<std::ptrdiff_t>(i), std::make_pair(o, a - o));
            blk->n_regions++;
            out = blk;
            off = a;
            return true;
        }
    }
    std::unique_ptr<mem_block> blk(new (std::nothrow) mem_block());
    if (!blk) return tsr_set_error("Vulkan %s: out of host memory for a memory block", d->name.c_str());
    try {
        blk->free.reserve(1);
        d->blocks.reserve(d->blocks.size() + 1);
    } catch (...) {
        return tsr_set_error("Vulkan %s: out of host memory for a memory block", d->name.c_str());
    }
    blk->size = d->block_size;
    blk->type = type;
    VkMemoryAllocateInfo mai{};
    mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mai.allocationSize = blk->size;
    mai.memoryTypeIndex = type;
    VkResult r = vkAllocateMemory(d->dev, &mai, nullptr, &blk->mem);
    if (r != VK_SUCCESS)
        return tsr_set_error("Vulkan %s: vkAllocateMemory of a %zu-byte block failed (%s, memory type %u)", d->name.c_str(),
                             blk->size, vk_result_str(r), type);
    if (mapped) {
        r = vkMapMemory(d->dev, blk->mem, 0, VK_WHOLE_SIZE, 0, &blk->map);
        if (r != VK_SUCCESS) {
            vkFreeMemory(d->dev, blk->mem, nullptr);
            return tsr_set_error("Vulkan %s: vkMapMemory of a block failed (%s)", d->name.c_str(), vk_result_str(r));
        }
    }
    blk->free.push_back(std::make_pair(size, blk->size - size));
    blk->n_regions = 1;
    out = blk.get();
    off = 0;
    d->blocks.push_back(blk.release());
    return true;
}

/* A VkBuffer of `size` bytes for tensors: sub-allocated from a shared block when small,
 * on its own memory otherwise. All or nothing, like make_vk_buffer. */
static bool make_tensor_buffer(device * d, size_t size, const VkMemoryPropertyFlags * prefs, int n_prefs, bool want_map, buffer_ctx * c) {
    if (size > d->block_size / 4) {
        if (!make_vk_buffer(d, size, prefs, n_prefs, want_map, "buffer", c->buf, c->mem, c->map, nullptr)) return false;
        std::lock_guard<std::recursive_mutex> lock(d->mutex);
        d->n_dedicated++;
        d->dedicated_bytes += size;
        return true;
    }
    VkBufferCreateInfo bci{};
    bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bci.size = size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r = vkCreateBuffer(d->dev, &bci, nullptr, &c->buf);
    if (r != VK_SUCCESS) {
        c->buf = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan %s: vkCreateBuffer of %zu bytes failed (%s)", d->name.c_str(), size, vk_result_str(r));
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, c->buf, &req);
    int type = pick_memory_type(d, req.memoryTypeBits, prefs, n_prefs, d->block_size);
    if (type < 0) {
        vkDestroyBuffer(d->dev, c->buf, nullptr); c->buf = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan %s: no memory type for a buffer of %zu bytes (type bits 0x%x)", d->name.c_str(), size, req.memoryTypeBits);
    }
    const bool mapped = want_map && (d->memprops.memoryTypes[type].propertyFlags & MEM_HV);
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    mem_block * blk = nullptr;
    size_t off = 0;
    if (!block_acquire(d, static_cast<uint32_t>(type), mapped, static_cast<size_t>(req.size),
                       std::max<size_t>(static_cast<size_t>(req.alignment), d->align), blk, off)) {
        vkDestroyBuffer(d->dev, c->buf, nullptr); c->buf = VK_NULL_HANDLE;
        return false;
    }
    r = vkBindBufferMemory(d->dev, c->buf, blk->mem, off);
    if (r != VK_SUCCESS) {
        block_release(d, blk, off, static_cast<size_t>(req.size));
        vkDestroyBuffer(d->dev, c->buf, nullptr); c->buf = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan %s: vkBindBufferMemory failed (%s)", d->name.c_str(), vk_result_str(r));
    }
    c->block = blk;
    c->mem_off = off;
    c->mem_size = static_cast<size_t>(req.size);
    c->map = mapped ? static_cast<char *>(blk->map) + off : nullptr;
    return true;
}

static void free_tensor_buffer(buffer_ctx * c) {
    device * d = c->dev;
    if (c->block) {
        std::lock_guard<std::recursive_mutex> lock(d->mutex);
        vkDestroyBuffer(d->dev, c->buf, nullptr);
        c->buf = VK_NULL_HANDLE;
        block_release(d, c->block, c->mem_off, c->mem_size);
        c->block = nullptr;
        c->map = nullptr;
        return;
    }
    free_vk_buffer(d, c->buf, c->mem, c->map);
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    d->n_dedicated--;
    d->dedicated_bytes -= c->size;
}

static void buf_free(tsr_backend_buffer_t b) {
    buffer_ctx * c = static_cast<buffer_ctx *>(b->context);
    if (!c) return;
    free_tensor_buffer(c);
    delete c;
}

static void * buf_get_base(tsr_backend_buffer_t) { return FAKE_BASE; }

static bool check_range(const tsr_tensor * t, size_t offset, size_t size, const char * what) {
    if (!t->data || !t->buffer) return tsr_set_error("Vulkan %s of tensor '%s': tensor is not placed in a buffer", what, t->name);
    size_t nb = tsr_nbytes(t);
    if (offset > nb || size > nb - offset)
        return tsr_set_error("Vulkan %s of tensor '%s': bytes [%zu, %zu) are outside its %zu bytes", what, t->name, offset,
                             offset + size, nb);
    return true;
}

static bool buf_set_tensor(tsr_backend_buffer_t b, tsr_tensor * t, const void * data, size_t offset, size_t size) {
    buffer_ctx * c = static_cast<buffer_ctx *>(b->context);
    if (!check_range(t, offset, size, "set_tensor")) return false;
    if (size == 0) return true;
    size_t off = tensor_offset(t) + offset;
    if (c->map) { memcpy(static_cast<char *>(c->map) + off, data, size); return true; }
    return staged_copy(c->dev, c->buf, off, const_cast<void *>(data), size, false);
}

static bool buf_get_tensor(tsr_backend_buffer_t b, const tsr_tensor * t, void * data, size_t offset, size_t size) {
    buffer_ctx * c = static_cast<buffer_ctx *>(b->context);
    if (!check_range(t, offset, size, "get_tensor")) return false;
    if (size == 0) return true;
    size_t off = tensor_offset(t) + offset;
    if (c->map) { memcpy(data, static_cast<const char *>(c->map) + off, size); return true; }
    return staged_copy(c->dev, c->buf, off, data, size, true);
}

/* Fill [off, off+size) of a buffer with `value`: vkCmdFillBuffer on the 4-byte aligned
 * middle, the few unaligned head/tail bytes through staging. */
static bool fill_bytes(buffer_ctx * c, size_t off, size_t size, uint8_t value) {
    if (size == 0) return true;
    if (c->map) { memset(static_cast<char *>(c->map) + off, value, size); return true; }
    device * d = c->dev;
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    const size_t end = off + size, a0 = align_up(off, 4), a1 = align_down(end, 4);
    uint8_t tmp[8];
    memset(tmp, value, sizeof tmp);
    if (a1 <= a0) return staged_copy(d, c->buf, off, tmp, size, false);  /* size < 8 here */
    if (!xfer_begin(d)) return false;
    vkCmdFillBuffer(d->xfer_cb, c->buf, a0, a1 - a0, 0x01010101u * value);
    if (!xfer_submit_wait(d)) return false;
    if (a0 > off && !staged_copy(d, c->buf, off, tmp, a0 - off, false)) return false;
    if (end > a1 && !staged_copy(d, c->buf, a1, tmp, end - a1, false)) return false;
    return true;
}

static bool buf_memset_tensor(tsr_backend_buffer_t b, tsr_tensor * t, uint8_t value, size_t offset, size_t size) {
    buffer_ctx * c = static_cast<buffer_ctx *>(b->context);
    if (!check_range(t, offset, size, "memset_tensor")) return false;
    return fill_bytes(c, tensor_offset(t) + offset, size, value);
}

static void buf_clear(tsr_backend_buffer_t b, uint8_t value) {
    buffer_ctx * c = static_cast<buffer_ctx *>(b->context);
    fill_bytes(c, 0, c->size, value);
}

static bool buft_is_vk_impl(tsr_backend_buffer_type_t buft);

static bool buf_cpy_tensor(tsr_backend_buffer_t b, const tsr_tensor * src, tsr_tensor * dst) {
    buffer_ctx * dc = static_cast<buffer_ctx *>(b->context);
    if (!src->buffer || !buft_is_vk_impl(src->buffer->buft)) return false;
    buffer_ctx * sc = tensor_buf(src);
    if (!sc || sc->dev != dc->dev) return false;
    size_t n = tsr_nbytes(src);
    if (n != tsr_nbytes(dst)) return false;
    if (sc->map && dc->map) {
        memmove(static_cast<char *>(dc->map) + tensor_offset(dst), static_cast<char *>(sc->map) + tensor_offset(src), n);
        return true;
    }
    device * d = dc->dev;
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    if (!xfer_begin(d)) return false;
    VkBufferCopy c{tensor_offset(src), tensor_offset(dst), n};
    vkCmdCopyBuffer(d->xfer_cb, sc->buf, dc->buf, 1, &c);
    return xfer_submit_wait(d);
}

/* Filled member by member: each entry names its member; init_tensor is left NULL. */
static constexpr tsr_backend_buffer_i buffer_iface = [] {
    tsr_backend_buffer_i b = {};
    b.free_buffer = buf_free;
    b.get_base = buf_get_base;
    b.memset_tensor = buf_memset_tensor;
    b.set_tensor = buf_set_tensor;
    b.get_tensor = buf_get_tensor;
    b.cpy_tensor = buf_cpy_tensor;
    b.clear = buf_clear;
    return b;
}();

/* ---- buffers over caller memory (VK_EXT_external_memory_host) ------------------------------ */

static bool import_host_memory(device * d, void * ptr, size_t size, buffer_ctx * c) {
    const VkExternalMemoryHandleTypeFlagBits handle = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    VkMemoryHostPointerPropertiesEXT hp{};
    hp.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
    VkResult r = d->get_host_pointer_props(d->dev, handle, ptr, &hp);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: host pointer %p cannot be imported (%s)", d->name.c_str(), ptr, vk_result_str(r));
    VkExternalMemoryBufferCreateInfo ext{};
    ext.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
    ext.handleTypes = handle;
    VkBufferCreateInfo bci{};
    bci.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bci.pNext = &ext;
    bci.size = size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    r = vkCreateBuffer(d->dev, &bci, nullptr, &c->buf);
    if (r != VK_SUCCESS) { c->buf = VK_NULL_HANDLE; return tsr_set_error("Vulkan %s: vkCreateBuffer over host memory failed (%s)", d->name.c_str(), vk_result_str(r)); }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, c->buf, &req);
    const VkMemoryPropertyFlags prefs[] = { MEM_HV | MEM_HC, MEM_HV };
    const int type = pick_memory_type(d, req.memoryTypeBits & hp.memoryTypeBits, prefs, 2, size);
    if (type < 0) return tsr_set_error("Vulkan %s: no host-visible memory type can import host pointer %p", d->name.c_str(), ptr);
    VkImportMemoryHostPointerInfoEXT imp{};
    imp.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
    imp.handleType = handle;
    imp.pHostPointer = ptr;
    VkMemoryAllocateInfo mai{};
    mai.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mai.pNext = &imp;
    mai.allocationSize = size;
    mai.memoryTypeIndex = static_cast<uint32_t>(type);
    r = vkAllocateMemory(d->dev, &mai, nullptr, &c->mem);
    if (r == VK_SUCCESS) r = vkBindBufferMemory(d->dev, c->buf, c->mem, 0);
    if (r == VK_SUCCESS) r = vkMapMemory(d->dev, c->mem, 0, VK_WHOLE_SIZE, 0, &c->map);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: importing %zu bytes at %p failed (%s)", d->name.c_str(), size, ptr, vk_result_str(r));
    return true;
}

/* A buffer over size bytes at ptr: dedicated (imported) memory, freed without freeing ptr. */
static tsr_backend_buffer_t buffer_from_host_ptr(device * d, void * ptr, size_t size, size_t max_tensor_size) {
    const size_t al = d->host_import_align;
    if (al == 0) {
        tsr_set_error("Vulkan %s: cannot wrap host memory (no VK_EXT_external_memory_host)", d->name.c_str());
        return nullptr;
    }
    if (reinterpret_cast<uintptr_t>(ptr) % al != 0 || size % al != 0) {
        tsr_set_error("Vulkan %s: host memory at %p of %zu bytes: pointer and size must be multiples of %zu (minImportedHostPointerAlignment)",
                      d->name.c_str(), ptr, size, al);
        return nullptr;
    }
    if (size > d->max_alloc || max_tensor_size > d->max_range) {
        tsr_set_error("Vulkan %s: host memory of %zu bytes (largest tensor %zu) exceeds the device's limits (%zu bytes per allocation, %zu per binding)",
                      d->name.c_str(), size, max_tensor_size, d->max_alloc, d->max_range);
        return nullptr;
    }
    std::unique_ptr<buffer_ctx> c(new (std::nothrow) buffer_ctx());
    if (!c) { tsr_set_error("Vulkan %s: out of host memory for a buffer", d->name.c_str()); return nullptr; }
    c->dev = d;
    c->size = size;
    if (!import_host_memory(d, ptr, size, c.get())) {
        free_vk_buffer(d, c->buf, c->mem, c->map);
        return nullptr;
    }
    {
        std::lock_guard<std::recursive_mutex> lock(d->mutex);  /* free_tensor_buffer counts it back */
        d->n_dedicated++;
        d->dedicated_bytes += size;
    }
    buffer_ctx * raw = c.release();
    tsr_backend_buffer_t b = tsr_backend_buffer_init(&d->buft, buffer_iface, raw, size);
    if (!b) {
        free_tensor_buffer(raw);
        delete raw;
    }
    return b;
}

/* ---- buffer type ---------------------------------------------------------------------------- */

static const char * buft_get_name(tsr_backend_buffer_type_t buft) {
    return static_cast<device *>(buft->context)->name.c_str();
}

static bool unified_enabled(const device * d) {
    if (!d->unified) return false;
    const char * e = getenv("TSR_VULKAN_NO_UNIFIED");
    return !(e && *e && strcmp(e, "0") != 0);
}

static tsr_backend_buffer_t buft_alloc_buffer(tsr_backend_buffer_type_t buft, size_t size) {
    device * d = static_cast<device *>(buft->context);
    std::unique_ptr<buffer_ctx> c(new (std::nothrow) buffer_ctx());
    if (!c) { tsr_set_error("Vulkan %s: out of host memory for a buffer", d->name.c_str()); return nullptr; }
    c->dev = d;
    c->size = align_up(std::max<size_t>(size, 1), 16);
    bool uni = unified_enabled(d);
    const VkMemoryPropertyFlags uni_prefs[] = { MEM_DL | MEM_HV | MEM_HC, MEM_DL, 0 };
    const VkMemoryPropertyFlags dev_prefs[] = { MEM_DL, 0 };
    if (c->size > d->max_alloc) {
        tsr_set_error("Vulkan %s: a buffer of %zu bytes exceeds the device's maximum allocation of %zu bytes", d->name.c_str(),
                      size, d->max_alloc);
        return nullptr;
    }
    if (!make_tensor_buffer(d, c->size, uni ? uni_prefs : dev_prefs, uni ? 3 : 2, uni, c.get())) return nullptr;
    buffer_ctx * raw = c.release();
    tsr_backend_buffer_t b = tsr_backend_buffer_init(buft, buffer_iface, raw, size);
    if (!b) {
        free_tensor_buffer(raw);
        delete raw;
        return nullptr;
    }
    return b;
}

static size_t buft_get_alignment(tsr_backend_buffer_type_t buft) { return static_cast<device *>(buft->context)->align; }
static size_t buft_get_max_size(tsr_backend_buffer_type_t buft) { return static_cast<device *>(buft->context)->max_alloc; }
static size_t buft_get_alloc_size(tsr_backend_buffer_type_t, const tsr_tensor * t) { return tsr_nbytes(t); }
static bool buft_is_host(tsr_backend_buffer_type_t) { return false; }

static bool buft_is_vk_impl(tsr_backend_buffer_type_t buft) {
    return buft && buft->iface.get_name == buft_get_name;
}

static void init_buft(device * d) {
    d->block_size = std::min(BLOCK_SIZE, d->max_alloc);
    d->buft.iface.get_name = buft_get_name;
    d->buft.iface.alloc_buffer = buft_alloc_buffer;
    d->buft.iface.get_alignment = buft_get_alignment;
    d->buft.iface.get_max_size = buft_get_max_size;
    d->buft.iface.get_alloc_size = buft_get_alloc_size;
    d->buft.iface.is_host = buft_is_host;
    d->buft.context = d;
}

static bool create_transfer_objects(device * d) {
    VkCommandPoolCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = d->qfam;
    VkResult r = vkCreateCommandPool(d->dev, &pci, nullptr, &d->xfer_pool);
    if (r != VK_SUCCESS) { d->xfer_pool = VK_NULL_HANDLE; return tsr_set_error("Vulkan %s: vkCreateCommandPool failed (%s)", d->name.c_str(), vk_result_str(r)); }
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = d->xfer_pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    r = vkAllocateCommandBuffers(d->dev, &ai, &d->xfer_cb);
    if (r != VK_SUCCESS) return tsr_set_error("Vulkan %s: vkAllocateCommandBuffers failed (%s)", d->name.c_str(), vk_result_str(r));
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    r = vkCreateFence(d->dev, &fci, nullptr, &d->xfer_fence);
    if (r != VK_SUCCESS) { d->xfer_fence = VK_NULL_HANDLE; return tsr_set_error("Vulkan %s: vkCreateFence failed (%s)", d->name.c_str(), vk_result_str(r)); }
    const VkMemoryPropertyFlags prefs[] = { MEM_DL, 0 };
    void * map = nullptr;
    if (!make_vk_buffer(d, 256, prefs, 2, false, "dummy binding", d->dummy, d->dummy_mem, map, nullptr)) return false;
    return true;
}

static void destroy_device(device * d) {
    if (!d || !d->dev) return;
    vkDeviceWaitIdle(d->dev);
    for (int s = 0; s < SH_COUNT; s++) {
        for (int k = 0; k < MAX_SPEC; k++) if (d->pipes[s][k]) vkDestroyPipeline(d->dev, d->pipes[s][k], nullptr);
        if (d->modules[s]) vkDestroyShaderModule(d->dev, d->modules[s], nullptr);
    }
    for (mem_block * blk : d->blocks) {  /* only left when buffers were never freed */
        if (blk->map) vkUnmapMemory(d->dev, blk->mem);
        vkFreeMemory(d->dev, blk->mem, nullptr);
        delete blk;
    }
    d->blocks.clear();
    free_vk_buffer(d, d->stage.buf, d->stage.mem, d->stage.map);
    void * map = nullptr;
    free_vk_buffer(d, d->dummy, d->dummy_mem, map);
    if (d->xfer_fence) vkDestroyFence(d->dev, d->xfer_fence, nullptr);
    if (d->xfer_pool) vkDestroyCommandPool(d->dev, d->xfer_pool, nullptr);
    if (d->layout) vkDestroyPipelineLayout(d->dev, d->layout, nullptr);
    if (d->dsl) vkDestroyDescriptorSetLayout(d->dev, d->dsl, nullptr);
    vkDestroyDevice(d->dev, nullptr);
    d->dev = VK_NULL_HANDLE;
}

} // namespace tsr_vk
} // namespace

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_vk_buffer_type(int device) {
    tsr_vk::device * d = tsr_vk::get_device(device);
    return d ? &d->buft : nullptr;
}

TSR_API_IMPL bool tsr_backend_buft_is_vk(tsr_backend_buffer_type_t buft) {
    return tsr_vk::buft_is_vk_impl(buft);
}

TSR_API_IMPL bool tsr_backend_vk_get_memory_stats(int device, struct tsr_vk_memory_stats * stats) {
    tsr_vk::device * d = tsr_vk::get_device(device);
    if (!d) return false;
    if (!stats) return tsr_set_error("tsr_backend_vk_get_memory_stats: NULL stats");
    std::lock_guard<std::recursive_mutex> lock(d->mutex);
    *stats = tsr_vk_memory_stats{};
    stats->block_size = d->block_size;
    for (const tsr_vk::mem_block * blk : d->blocks) {
        stats->n_blocks++;
        stats->block_bytes += blk->size;
        stats->n_regions += static_cast<size_t>(blk->n_regions);
        size_t free_b = 0;
        for (auto & f : blk->free) free_b += f.second;
        stats->block_free_bytes += free_b;
    }
    stats->n_dedicated = d->n_dedicated;
    stats->dedicated_bytes = d->dedicated_bytes;
    stats->staging_bytes = d->stage.size;
    stats->max_range = d->max_range;
    stats->max_alloc = d->max_alloc;
    return true;
}
