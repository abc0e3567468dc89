/*
 * vk_device.inl - the Vulkan instance, device enumeration and selection, logical
 * device creation (one per physical device, created on first use, kept until exit).
 */
namespace {
namespace tsr_vk {

struct instance_state {
    std::mutex mutex;
    bool tried = false;
    VkInstance inst = VK_NULL_HANDLE;
    std::vector<VkPhysicalDevice> phys;
    std::string error;                       /* why there are no devices */
    std::unique_ptr<device> devs[TSR_VK_MAX_DEVICES];
};

static instance_state & inst_state() {
    static instance_state * s = new instance_state();  /* never destroyed: drivers may outlive statics */
    return *s;
}

/* Create the instance and list the physical devices once. Caller holds the mutex. */
static bool ensure_instance(instance_state & s) {
    if (s.tried) return s.inst != VK_NULL_HANDLE;
    s.tried = true;
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.pApplicationName = "tessera";
    app.pEngineName = "tessera";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ci.pApplicationInfo = &app;
    /* enumerate portability drivers too (MoltenVK) when the loader knows the extension */
    std::vector<const char *> exts;
    uint32_t n_ext = 0;
    if (vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, nullptr) == VK_SUCCESS && n_ext) {
        std::vector<VkExtensionProperties> props(n_ext);
        if (vkEnumerateInstanceExtensionProperties(nullptr, &n_ext, props.data()) == VK_SUCCESS) {
            for (auto & p : props) {
                if (strcmp(p.extensionName, "VK_KHR_portability_enumeration") == 0) {
                    exts.push_back("VK_KHR_portability_enumeration");
                    ci.flags |= 0x00000001; /* VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR */
                }
            }
        }
    }
    ci.enabledExtensionCount = static_cast<uint32_t>(exts.size());
    ci.ppEnabledExtensionNames = exts.data();
    VkResult r = vkCreateInstance(&ci, nullptr, &s.inst);
    if (r != VK_SUCCESS) {
        s.inst = VK_NULL_HANDLE;
        s.error = std::string("Vulkan: vkCreateInstance failed (") + vk_result_str(r) + "): no Vulkan driver installed?";
        return false;
    }
    uint32_t n = 0;
    r = vkEnumeratePhysicalDevices(s.inst, &n, nullptr);
    if (r == VK_SUCCESS && n > 0) {
        s.phys.resize(n);
        r = vkEnumeratePhysicalDevices(s.inst, &n, s.phys.data());
        s.phys.resize(n);
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        s.phys.clear();
        s.error = std::string("Vulkan: vkEnumeratePhysicalDevices failed (") + vk_result_str(r) + ")";
    } else if (s.phys.empty()) {
        s.error = "Vulkan: the loader found no physical device";
    }
    if (s.phys.size() > TSR_VK_MAX_DEVICES) s.phys.resize(TSR_VK_MAX_DEVICES);
    return true;
}

static int device_count() {
    instance_state & s = inst_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ensure_instance(s);
    return static_cast<int>(s.phys.size());
}

static const char * type_word(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static int default_device_index() {
    int n = device_count();
    if (n <= 0) return -1;
    const char * env = getenv("TSR_VULKAN_DEVICE");
    if (env && *env) {
        char * end = nullptr;
        long v = strtol(env, &end, 10);
        if (end == env || *end != '\0' || v < 0 || v >= n) {
            tsr_set_error("Vulkan: TSR_VULKAN_DEVICE='%s' is not a device index in [0, %d)", env, n);
            return -1;
        }
        return static_cast<int>(v);
    }
    instance_state & s = inst_state();
    int best = 0, best_rank = 99;
    for (int i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(s.phys[i], &p);
        int rank = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 0 :
                   p.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? 1 :
                   p.deviceType == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU ? 2 : 3;
        if (rank < best_rank) { best_rank = rank; best = i; }
    }
    return best;
}

static void destroy_device(device * d);
static bool create_pipeline_layout(device * d);
static bool create_transfer_objects(device * d);
static void init_buft(device * d);

/* create_device, step 1: Vulkan 1.2 and the 16/8-bit storage the shaders need. */
static bool check_device_features(const device * d) {
    VkPhysicalDeviceVulkan11Features f11{};
    f11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    VkPhysicalDeviceVulkan12Features f12{};
    f12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2{};
    f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    f2.pNext = &f11;
    if (d->props.apiVersion < VK_API_VERSION_1_2) {
        return tsr_set_error("Vulkan device %d (%s): Vulkan %u.%u is below the 1.2 tessera needs", d->index, d->props.deviceName,
                             VK_VERSION_MAJOR(d->props.apiVersion), VK_VERSION_MINOR(d->props.apiVersion));
    }
    vkGetPhysicalDeviceFeatures2(d->phys, &f2);
    if (!f11.storageBuffer16BitAccess || !f12.storageBuffer8BitAccess) {
        return tsr_set_error("Vulkan device %d (%s): lacks storageBuffer16BitAccess/storageBuffer8BitAccess, which tessera's shaders need",
                             d->index, d->props.deviceName);
    }
    return true;
}

/* create_device, step 2: a compute queue family (d->qfam), one without graphics if any. */
static bool pick_compute_queue(device * d) {
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qf(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(d->phys, &nq, qf.data());
    int fam = -1;
    for (uint32_t q = 0; q < nq && fam < 0; q++)   /* prefer a compute queue without graphics */
        if ((qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(qf[q].queueFlags & VK_QUEUE_GRAPHICS_BIT)) fam = static_cast<int>(q);
    for (uint32_t q = 0; q < nq && fam < 0; q++)
        if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = static_cast<int>(q);
    if (fam < 0) return tsr_set_error("Vulkan device %d (%s): no compute queue", d->index, d->props.deviceName);
    d->qfam = static_cast<uint32_t>(fam);
    return true;
}

/* create_device, step 3: the logical device with the storage features enabled, and its queue. */
static bool has_device_extension(VkPhysicalDevice phys, const char * name) {
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, nullptr) != VK_SUCCESS || n == 0) return false;
    std::vector<VkExtensionProperties> props(n);
    if (vkEnumerateDeviceExtensionProperties(phys, nullptr, &n, props.data()) != VK_SUCCESS) return false;
    for (const VkExtensionProperties & p : props)
        if (strcmp(p.extensionName, name) == 0) return true;
    return false;
}

/* The alignment an imported host pointer and its size need, and the query for the memory
 * types a pointer can be imported as. */
static void read_host_import_limits(device * d) {
    VkPhysicalDeviceExternalMemoryHostPropertiesEXT hp{};
    hp.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT;
    VkPhysicalDeviceProperties2 p2{};
    p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
    p2.pNext = &hp;
    vkGetPhysicalDeviceProperties2(d->phys, &p2);
    d->get_host_pointer_props =
        reinterpret_cast<PFN_vkGetMemoryHostPointerPropertiesEXT>(vkGetDeviceProcAddr(d->dev, "vkGetMemoryHostPointerPropertiesEXT"));
    if (d->get_host_pointer_props && hp.minImportedHostPointerAlignment > 0)
        d->host_import_align = static_cast<size_t>(hp.minImportedHostPointerAlignment);
}

static bool create_logical_device(device * d) {
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci{};
    qci.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    qci.queueFamilyIndex = d->qfam;
    qci.queueCount = 1;
    qci.pQueuePriorities = &prio;

    VkPhysicalDeviceVulkan11Features e11{};
    e11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    e11.storageBuffer16BitAccess = VK_TRUE;
    VkPhysicalDeviceVulkan12Features e12{};
    e12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    e12.storageBuffer8BitAccess = VK_TRUE;
    e11.pNext = &e12;
    VkPhysicalDeviceFeatures2 e2{};
    e2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    e2.pNext = &e11;

    const bool host_import = has_device_extension(d->phys, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
    const char * host_import_ext = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.pNext = &e2;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    dci.enabledExtensionCount = host_import ? 1 : 0;
    dci.ppEnabledExtensionNames = host_import ? &host_import_ext : nullptr;
    VkResult r = vkCreateDevice(d->phys, &dci, nullptr, &d->dev);
    if (r != VK_SUCCESS) {
        d->dev = VK_NULL_HANDLE;
        return tsr_set_error("Vulkan device %d (%s): vkCreateDevice failed (%s)", d->index, d->props.deviceName, vk_result_str(r));
    }
    vkGetDeviceQueue(d->dev, d->qfam, 0, &d->queue);
    if (host_import) read_host_import_limits(d);
    return true;
}

/* create_device, step 4: the limits buffers are cut to, and whether memory is unified. */
static void read_device_limits(device * d) {
    d->align = std::max<size_t>(16, static_cast<size_t>(d->props.limits.minStorageBufferOffsetAlignment));
    d->max_range = d->props.limits.maxStorageBufferRange;
    {
        VkPhysicalDeviceMaintenance3Properties m3{};
        m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
        VkPhysicalDeviceProperties2 p2{};
        p2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
        p2.pNext = &m3;
        vkGetPhysicalDeviceProperties2(d->phys, &p2);
        d->max_alloc = m3.maxMemoryAllocationSize ? static_cast<size_t>(m3.maxMemoryAllocationSize) : (size_t(1) << 31);
    }
    /* unified memory: a CPU or integrated device whose device-local memory is host-visible */
    if (d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU) {
        const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                           VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        for (uint32_t t = 0; t < d->memprops.memoryTypeCount; t++)
            if ((d->memprops.memoryTypes[t].propertyFlags & want) == want) d->unified = true;
    }
}

/* create_device, step 5: the embedded shaders must be the ones this code expects. */
static bool check_embedded_shaders() {
    const size_t n_sh = sizeof(tsr_vk_shaders) / sizeof(tsr_vk_shaders[0]);
    if (n_sh != SH_COUNT) {
        return tsr_set_error("Vulkan: tessera-vulkan-shaders.h has %zu shaders, the backend expects %d: regenerate it", n_sh, (int)SH_COUNT);
    }
    for (int k = 0; k < SH_COUNT; k++) {
        if (strcmp(tsr_vk_shaders[k].name, shader_names[k]) != 0) {
            return tsr_set_error("Vulkan: shader %d is '%s', expected '%s': regenerate tessera-vulkan-shaders.h", k,
                                 tsr_vk_shaders[k].name, shader_names[k]);
        }
    }
    return true;
}

/* Create the logical device for physical device i. Caller holds the instance mutex. */
static device * create_device(instance_state & s, int i) {
    std::unique_ptr<device> d(new device());
    d->index = i;
    d->phys = s.phys[i];
    vkGetPhysicalDeviceProperties(d->phys, &d->props);
    vkGetPhysicalDeviceMemoryProperties(d->phys, &d->memprops);
    d->name = "Vulkan" + std::to_string(i);
    d->desc = std::string(d->props.deviceName) + " [" + type_word(d->props.deviceType) + "]";
    if (!check_device_features(d.get()) || !pick_compute_queue(d.get()) || !create_logical_device(d.get())) return nullptr;
    read_device_limits(d.get());
    if (!check_embedded_shaders() || !create_pipeline_layout(d.get()) || !create_transfer_objects(d.get())) {
        destroy_device(d.get());
        return nullptr;
    }
    init_buft(d.get());
    return d.release();
}

/* The device record for index i (-1: default), created on first use. NULL + error. */
static device * get_device(int i) {
    if (i < -1) {
        tsr_set_error("Vulkan: device index %d: use 0..%d, or -1 for the default device", i, device_count() - 1);
        return nullptr;
    }
    if (i < 0) {
        i = default_device_index();
        if (i < 0) {
            if (!tsr_last_error()[0]) tsr_set_error("Vulkan: no device");
            instance_state & s = inst_state();
            std::lock_guard<std::mutex> lock(s.mutex);
            if (!s.error.empty() && s.phys.empty()) tsr_set_error("%s", s.error.c_str());
            return nullptr;
        }
    }
    instance_state & s = inst_state();
    std::lock_guard<std::mutex> lock(s.mutex);
    ensure_instance(s);
    int n = static_cast<int>(s.phys.size());
    if (n == 0) {
        tsr_set_error("%s", s.error.empty() ? "Vulkan: no device" : s.error.c_str());
        return nullptr;
    }
    if (i >= n) {
        tsr_set_error("Vulkan: device index %d out of range (%d device%s)", i, n, n == 1 ? "" : "s");
        return nullptr;
    }
    if (!s.devs[i]) {
        try {
            s.devs[i].reset(create_device(s, i));
        } catch (...) {  /* std::string / std::vector growth inside: never throw out of the API */
            tsr_set_error("Vulkan: out of host memory while creating device %d", i);
            return nullptr;
        }
    }
    return s.devs[i].get();
}

} // namespace tsr_vk
} // namespace

TSR_API_IMPL int tsr_backend_vk_get_device_count(void) {
    int n = tsr_vk::device_count();
    if (n == 0) {
        tsr_vk::instance_state & s = tsr_vk::inst_state();
        std::lock_guard<std::mutex> lock(s.mutex);
        tsr_set_error("%s", s.error.c_str());
    }
    return n;
}

TSR_API_IMPL int tsr_backend_vk_default_device(void) {
    return tsr_vk::default_device_index();
}

TSR_API_IMPL bool tsr_backend_vk_get_device_description(int device, char * desc, size_t size) {
    int n = tsr_vk::device_count();
    if (device < 0 || device >= n) return tsr_set_error("Vulkan: device index %d out of range (%d devices)", device, n);
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(tsr_vk::inst_state().phys[device], &p);
    if (desc && size) snprintf(desc, size, "%s [%s]", p.deviceName, tsr_vk::type_word(p.deviceType));
    return true;
}

TSR_API_IMPL bool tsr_backend_vk_get_device_memory(int device, size_t * free_bytes, size_t * total_bytes) {
    int n = tsr_vk::device_count();
    if (device < 0 || device >= n) return tsr_set_error("Vulkan: device index %d out of range (%d devices)", device, n);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(tsr_vk::inst_state().phys[device], &mp);
    size_t best = 0;
    for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
        if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) best = std::max<size_t>(best, mp.memoryHeaps[h].size);
    if (free_bytes) *free_bytes = best;
    if (total_bytes) *total_bytes = best;
    return true;
}
