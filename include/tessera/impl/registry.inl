/*
 * registry.inl - devices, backend kinds and the registry of every backend compiled into
 * the program (ggml-backend-reg.cpp). See backend.h and backend_impl.h.
 *
 * How backends get in without static-initialization-order trouble: the registry is a
 * function-local static, built on first use, so it exists whenever a backend registers.
 * The CPU and Vulkan parts register from a static of their own implementation block (a
 * header-only part cannot be called by name from a core compiled before it); the CUDA
 * library, a separate object that nothing might otherwise pull in, is asked by name on
 * first use when the build says it is linked (TSR_HAVE_CUDA).
 */

#include <cctype>
#include <mutex>
#include <string>

#if defined(TSR_HAVE_CUDA) && !defined(TSR_STATIC) && !defined(TSR_CUDA_DECLARED)
extern "C" tsr_backend_reg_t tsr_backend_cuda_reg(void);  /* tessera-cuda.h, in the CUDA library */
#endif

TSR_IMPL_NS_BEGIN
namespace {

struct backend_registry {
    std::mutex mutex;
    tsr_backend_reg_t regs[TSR_BACKEND_MAX_REGS] = {};
    size_t n_regs = 0;
    backend_registry();
};

static bool names_equal(const char * a, const char * b) {
    if (!a || !b) return false;
    for (; *a && *b; ++a, ++b)
        if (std::tolower((unsigned char) *a) != std::tolower((unsigned char) *b)) return false;
    return *a == *b;
}

static bool is_cpu_reg(tsr_backend_reg_t reg) { return names_equal(reg->iface.get_name(reg), "CPU"); }

/* The caller holds the mutex (or is building the registry). The CPU backend's kind goes
 * first, so the CPU backend is the first device of type CPU even when a Vulkan
 * implementation on the CPU registered before it. */
static bool add_reg(backend_registry & r, tsr_backend_reg_t reg) {
    if (!reg) return tsr_set_error("tsr_backend_register: reg is NULL");
    if (reg->api_version != TSR_BACKEND_API_VERSION)
        return tsr_set_error("tsr_backend_register: backend API version %d, this tessera has version %d (rebuild the backend against this backend_impl.h)",
                             reg->api_version, TSR_BACKEND_API_VERSION);
    if (!reg->iface.get_name || !reg->iface.get_device_count || !reg->iface.get_device)
        return tsr_set_error("tsr_backend_register: reg lacks get_name, get_device_count or get_device");
    for (size_t i = 0; i < r.n_regs; ++i)
        if (r.regs[i] == reg) return true;
    if (r.n_regs == TSR_BACKEND_MAX_REGS)
        return tsr_set_error("tsr_backend_register: '%s' does not fit: the registry holds %d backend kinds",
                             reg->iface.get_name(reg), TSR_BACKEND_MAX_REGS);
    size_t at = is_cpu_reg(reg) ? 0 : r.n_regs;
    for (size_t i = r.n_regs; i > at; --i) r.regs[i] = r.regs[i - 1];
    r.regs[at] = reg;
    r.n_regs++;
    return true;
}

/* The CUDA library is asked here rather than registering from a static of its own: a
 * static library's object that the program never names is not linked at all. */
backend_registry::backend_registry() {
#if defined(TSR_HAVE_CUDA) && !defined(TSR_STATIC)
    add_reg(*this, tsr_backend_cuda_reg());
#endif
}

static backend_registry & registry() {
    static backend_registry r;
    return r;
}

/* A snapshot of the registered kinds, so no lock is held while a backend answers. */
struct reg_snapshot {
    tsr_backend_reg_t regs[TSR_BACKEND_MAX_REGS];
    size_t n = 0;
};
static reg_snapshot snapshot() {
    backend_registry & r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    reg_snapshot s;
    for (size_t i = 0; i < r.n_regs; ++i) s.regs[i] = r.regs[i];
    s.n = r.n_regs;
    return s;
}

/* "CPU, Vulkan0" - what there is, for error messages. */

/* The first device (in registry order) that `match` accepts, or NULL. */
template <typename Match> static tsr_backend_dev_t first_device(Match match) {
    const reg_snapshot s = snapshot();
    for (size_t i = 0; i < s.n; ++i) {
        const size_t n_dev = s.regs[i]->iface.get_device_count(s.regs[i]);
        for (size_t d = 0; d < n_dev; ++d) {
            tsr_backend_dev_t dev = s.regs[i]->iface.get_device(s.regs[i], d);
            if (match(dev)) return dev;
        }
    }
    return nullptr;
}
static tsr_backend_dev_t device_named(const char * name) {
    return first_device([name](tsr_backend_dev_t dev) { return names_equal(dev->iface.get_name(dev), name); });
}
static tsr_backend_dev_t device_of_type(enum tsr_backend_dev_type type) {
    return first_device([type](tsr_backend_dev_t dev) { return dev->iface.get_type(dev) == type; });
}

/* "CPU, Vulkan0" - what there is, for error messages. */
static std::string device_names() {
    std::string names;
    first_device([&names](tsr_backend_dev_t dev) {
        if (!names.empty()) names += ", ";
        names += dev->iface.get_name(dev);
        return false;
    });
    return names.empty() ? std::string("none") : names;
}

static const char * type_name(enum tsr_backend_dev_type type) {
    switch (type) {
    case TSR_BACKEND_DEVICE_TYPE_CPU: return "CPU";
    case TSR_BACKEND_DEVICE_TYPE_GPU: return "GPU";
    case TSR_BACKEND_DEVICE_TYPE_ACCEL: return "ACCEL";
    }
    return "unknown";
}

} // namespace
TSR_IMPL_NS_END

/* ---- writer side ------------------------------------------------------------------------- */

TSR_API_IMPL bool tsr_backend_register(tsr_backend_reg_t reg) {
    tsr_impl::backend_registry & r = tsr_impl::registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    return tsr_impl::add_reg(r, reg);
}

/* ---- devices ------------------------------------------------------------------------------- */

TSR_API_IMPL const char * tsr_backend_dev_name(tsr_backend_dev_t device) {
    return device ? device->iface.get_name(device) : "(null)";
}
TSR_API_IMPL const char * tsr_backend_dev_description(tsr_backend_dev_t device) {
    return device ? device->iface.get_description(device) : "(null)";
}
TSR_API_IMPL void tsr_backend_dev_memory(tsr_backend_dev_t device, size_t * free, size_t * total) {
    size_t f = 0, t = 0;
    if (device) device->iface.get_memory(device, &f, &t);
    if (free) *free = f;
    if (total) *total = t;
}
TSR_API_IMPL enum tsr_backend_dev_type tsr_backend_dev_type(tsr_backend_dev_t device) {
    return device ? device->iface.get_type(device) : TSR_BACKEND_DEVICE_TYPE_CPU;
}
TSR_API_IMPL void tsr_backend_dev_get_props(tsr_backend_dev_t device, struct tsr_backend_dev_props * props) {
    if (!props) return;
    *props = tsr_backend_dev_props{};
    if (!device) return;
    props->name = tsr_backend_dev_name(device);
    props->description = tsr_backend_dev_description(device);
    tsr_backend_dev_memory(device, &props->memory_free, &props->memory_total);
    props->type = tsr_backend_dev_type(device);
    props->caps.host_buffer = device->iface.get_host_buffer_type != nullptr;
    props->caps.buffer_from_host_ptr = device->iface.buffer_from_host_ptr != nullptr;
    props->caps.events = device->iface.event_new != nullptr;
    if (device->iface.get_props) device->iface.get_props(device, props);
}
TSR_API_IMPL tsr_backend_reg_t tsr_backend_dev_backend_reg(tsr_backend_dev_t device) { return device ? device->reg : nullptr; }
TSR_API_IMPL tsr_backend_t tsr_backend_dev_init(tsr_backend_dev_t device, const char * params) {
    if (!device) { tsr_set_error("tsr_backend_dev_init: device is NULL"); return nullptr; }
    tsr_backend_t backend = device->iface.init_backend(device, params);
    if (backend && !backend->device) backend->device = device;
    return backend;
}
TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_dev_buffer_type(tsr_backend_dev_t device) {
    return device ? device->iface.get_buffer_type(device) : nullptr;
}
TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_dev_host_buffer_type(tsr_backend_dev_t device) {
    return device && device->iface.get_host_buffer_type ? device->iface.get_host_buffer_type(device) : nullptr;
}
TSR_API_IMPL bool tsr_backend_dev_supports_op(tsr_backend_dev_t device, const struct tsr_tensor * op) {
    return device && op && device->iface.supports_op(device, op);
}
TSR_API_IMPL bool tsr_backend_dev_supports_buft(tsr_backend_dev_t device, tsr_backend_buffer_type_t buft) {
    return device && buft && device->iface.supports_buft(device, buft);
}
TSR_API_IMPL bool tsr_backend_dev_offload_op(tsr_backend_dev_t device, const struct tsr_tensor * op) {
    return device && op && device->iface.offload_op && device->iface.offload_op(device, op);
}

TSR_API_IMPL tsr_backend_buffer_t tsr_backend_dev_buffer_from_host_ptr(tsr_backend_dev_t device, void * ptr, size_t size,
                                                                       size_t max_tensor_size) {
    if (!device) { tsr_set_error("tsr_backend_dev_buffer_from_host_ptr: device is NULL"); return nullptr; }
    if (!device->iface.buffer_from_host_ptr) {
        tsr_set_error("tsr_backend_dev_buffer_from_host_ptr: device %s cannot wrap host memory (caps.buffer_from_host_ptr is false)",
                      tsr_backend_dev_name(device));
        return nullptr;
    }
    if (!ptr || size == 0) {
        tsr_set_error("tsr_backend_dev_buffer_from_host_ptr: device %s: %s", tsr_backend_dev_name(device), ptr ? "size is 0" : "ptr is NULL");
        return nullptr;
    }
    return device->iface.buffer_from_host_ptr(device, ptr, size, max_tensor_size ? max_tensor_size : size);
}

/* ---- events ---------------------------------------------------------------------------------- */

TSR_API_IMPL tsr_backend_event_t tsr_backend_event_new(tsr_backend_dev_t device) {
    if (!device) { tsr_set_error("tsr_backend_event_new: device is NULL"); return nullptr; }
    if (!device->iface.event_new) {
        tsr_set_error("tsr_backend_event_new: device %s has no events (caps.events is false)", tsr_backend_dev_name(device));
        return nullptr;
    }
    tsr_backend_event_t event = device->iface.event_new(device);
    if (event) event->device = device;
    return event;
}
TSR_API_IMPL void tsr_backend_event_free(tsr_backend_event_t event) {
    if (event) event->device->iface.event_free(event->device, event);
}
TSR_API_IMPL bool tsr_backend_event_record(tsr_backend_event_t event, tsr_backend_t backend) {
    if (!event || !backend) return tsr_set_error("tsr_backend_event_record: NULL event or backend");
    if (backend->device != event->device || !backend->iface.event_record)
        return tsr_set_error("tsr_backend_event_record: backend %s cannot record an event of device %s", tsr_backend_name(backend),
                             tsr_backend_dev_name(event->device));
    return backend->iface.event_record(backend, event);
}
TSR_API_IMPL void tsr_backend_event_synchronize(tsr_backend_event_t event) {
    if (event) event->device->iface.event_synchronize(event->device, event);
}
TSR_API_IMPL bool tsr_backend_event_wait(tsr_backend_t backend, tsr_backend_event_t event) {
    if (!event || !backend) return tsr_set_error("tsr_backend_event_wait: NULL event or backend");
    if (backend->iface.event_wait) return backend->iface.event_wait(backend, event);
    tsr_backend_event_synchronize(event);
    return true;
}

/* ---- backend kinds ------------------------------------------------------------------------- */

TSR_API_IMPL const char * tsr_backend_reg_name(tsr_backend_reg_t reg) { return reg ? reg->iface.get_name(reg) : "(null)"; }
TSR_API_IMPL size_t tsr_backend_reg_dev_count(tsr_backend_reg_t reg) { return reg ? reg->iface.get_device_count(reg) : 0; }
TSR_API_IMPL tsr_backend_dev_t tsr_backend_reg_dev_get(tsr_backend_reg_t reg, size_t index) {
    const size_t n = tsr_backend_reg_dev_count(reg);
    if (index >= n) {
        tsr_set_error("tsr_backend_reg_dev_get: device %zu of '%s', which has %zu", index, tsr_backend_reg_name(reg), n);
        return nullptr;
    }
    return reg->iface.get_device(reg, index);
}

/* ---- the registry -------------------------------------------------------------------------- */

TSR_API_IMPL size_t tsr_backend_reg_count(void) { return tsr_impl::snapshot().n; }
TSR_API_IMPL tsr_backend_reg_t tsr_backend_reg_get(size_t index) {
    const tsr_impl::reg_snapshot s = tsr_impl::snapshot();
    if (index >= s.n) {
        tsr_set_error("tsr_backend_reg_get: backend kind %zu, the registry holds %zu", index, s.n);
        return nullptr;
    }
    return s.regs[index];
}
TSR_API_IMPL tsr_backend_reg_t tsr_backend_reg_by_name(const char * name) {
    const tsr_impl::reg_snapshot s = tsr_impl::snapshot();
    for (size_t i = 0; i < s.n; ++i)
        if (tsr_impl::names_equal(s.regs[i]->iface.get_name(s.regs[i]), name)) return s.regs[i];
    tsr_set_error("tsr_backend_reg_by_name: no backend kind named '%s'", name ? name : "(null)");
    return nullptr;
}
TSR_API_IMPL size_t tsr_backend_dev_count(void) {
    size_t n = 0;
    tsr_impl::first_device([&n](tsr_backend_dev_t) { ++n; return false; });
    return n;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_dev_get(size_t index) {
    size_t seen = 0;
    tsr_backend_dev_t dev = tsr_impl::first_device([&seen, index](tsr_backend_dev_t) { return seen++ == index; });
    if (!dev) tsr_set_error("tsr_backend_dev_get: device %zu, the registry holds %zu", index, seen);
    return dev;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_dev_by_name(const char * name) {
    tsr_backend_dev_t dev = tsr_impl::device_named(name);
    if (!dev)
        tsr_set_error("tsr_backend_dev_by_name: no device named '%s' (devices: %s)", name ? name : "(null)",
                      tsr_impl::device_names().c_str());
    return dev;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_dev_by_type(enum tsr_backend_dev_type type) {
    tsr_backend_dev_t dev = tsr_impl::device_of_type(type);
    if (!dev)
        tsr_set_error("tsr_backend_dev_by_type: no device of type %s (devices: %s)", tsr_impl::type_name(type),
                      tsr_impl::device_names().c_str());
    return dev;
}
/* A device's name first ("Vulkan1"), then a backend kind's ("vulkan": its first device). */
TSR_API_IMPL tsr_backend_t tsr_backend_init_by_name(const char * name, const char * params) {
    tsr_backend_dev_t dev = tsr_impl::device_named(name);
    if (dev) return tsr_backend_dev_init(dev, params);
    const tsr_impl::reg_snapshot s = tsr_impl::snapshot();
    for (size_t i = 0; i < s.n; ++i) {
        if (!tsr_impl::names_equal(tsr_backend_reg_name(s.regs[i]), name)) continue;
        if (tsr_backend_reg_dev_count(s.regs[i]) == 0) {
            tsr_set_error("tsr_backend_init_by_name: the %s backend has no device", tsr_backend_reg_name(s.regs[i]));
            return nullptr;
        }
        return tsr_backend_dev_init(tsr_backend_reg_dev_get(s.regs[i], 0), params);
    }
    tsr_set_error("tsr_backend_init_by_name: no device or backend named '%s' (devices: %s)", name ? name : "(null)",
                  tsr_impl::device_names().c_str());
    return nullptr;
}
TSR_API_IMPL tsr_backend_t tsr_backend_init_by_type(enum tsr_backend_dev_type type, const char * params) {
    tsr_backend_dev_t dev = tsr_backend_dev_by_type(type);
    return dev ? tsr_backend_dev_init(dev, params) : nullptr;
}
TSR_API_IMPL tsr_backend_t tsr_backend_init_best(void) {
    tsr_backend_dev_t dev = tsr_impl::device_of_type(TSR_BACKEND_DEVICE_TYPE_GPU);
    if (!dev) dev = tsr_impl::device_of_type(TSR_BACKEND_DEVICE_TYPE_CPU);
    if (dev) return tsr_backend_dev_init(dev, nullptr);
    tsr_set_error("tsr_backend_init_best: no GPU or CPU device (devices: %s)", tsr_impl::device_names().c_str());
    return nullptr;
}
TSR_API_IMPL tsr_backend_dev_t tsr_backend_get_device(tsr_backend_t backend) { return backend ? backend->device : nullptr; }
