/*
 * device_cpu.inl - the CPU device and its backend kind in the registry (backend.h):
 * host memory from /proc/meminfo, the processor's name from /proc/cpuinfo.
 */
#include <cstdio>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace {
namespace tcpu {

/* The value in kB of one /proc/meminfo line ("MemTotal:  16318412 kB"), in bytes; 0 when absent. */
static size_t meminfo_bytes(const char * key) {
    FILE * f = std::fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t bytes = 0;
    const size_t key_len = std::strlen(key);
    while (std::fgets(line, sizeof line, f)) {
        unsigned long long kb = 0;
        if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':' && std::sscanf(line + key_len + 1, "%llu", &kb) == 1) {
            bytes = (size_t) kb * 1024;
            break;
        }
    }
    std::fclose(f);
    return bytes;
}

/* Host memory: MemTotal / MemAvailable where /proc/meminfo exists, else the physical
 * pages (free unknown: reported as total). */
static void host_memory(size_t * free, size_t * total) {
    size_t t = meminfo_bytes("MemTotal");
    size_t f = meminfo_bytes("MemAvailable");
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    if (t == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages > 0 && page > 0) t = (size_t) pages * (size_t) page;
    }
#endif
    *total = t;
    *free = f ? f : t;
}

/* The processor's name ("model name" of /proc/cpuinfo), else "CPU". Read once. */
static const char * processor_name() {
    static const std::string name = [] {
        std::string found = "CPU";
        FILE * f = std::fopen("/proc/cpuinfo", "r");
        if (!f) return found;
        char line[512];
        while (std::fgets(line, sizeof line, f)) {
            if (std::strncmp(line, "model name", 10) != 0) continue;
            const char * colon = std::strchr(line, ':');
            if (!colon) continue;
            std::string v = colon + 1;
            const size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t\r\n");
            if (b != std::string::npos) found = v.substr(b, e - b + 1);
            break;
        }
        std::fclose(f);
        return found;
    }();
    return name.c_str();
}

/* NULL or "" (defaults) or "n_threads=N" with N in [1, 512]. false + error naming the string. */
static bool parse_params(const char * params, int & n_threads) {
    n_threads = 0;
    if (!params || !*params) return true;
    int n = 0, used = 0;
    if (std::sscanf(params, "n_threads=%d%n", &n, &used) == 1 && params[used] == '\0' && n >= 1 && n <= 512) {
        n_threads = n;
        return true;
    }
    return tsr_set_error("CPU device: params '%s' not understood (NULL, \"\" or \"n_threads=N\" with N in 1..512)", params);
}

static const char * dev_get_name(tsr_backend_dev_t) { return "CPU"; }
static const char * dev_get_description(tsr_backend_dev_t) { return processor_name(); }
static void dev_get_memory(tsr_backend_dev_t, size_t * free, size_t * total) { host_memory(free, total); }
static enum tsr_backend_dev_type dev_get_type(tsr_backend_dev_t) { return TSR_BACKEND_DEVICE_TYPE_CPU; }
static tsr_backend_t dev_init_backend(tsr_backend_dev_t, const char * params) {
    int n_threads = 0;
    if (!parse_params(params, n_threads)) return nullptr;
    tsr_backend_t be = tsr_backend_cpu_init();
    if (be && n_threads > 0) tsr_backend_cpu_set_n_threads(be, n_threads);
    return be;
}
static tsr_backend_buffer_type_t dev_get_buffer_type(tsr_backend_dev_t) { return tsr_backend_cpu_buffer_type(); }
static bool dev_supports_op(tsr_backend_dev_t, const tsr_tensor * op) { return be_supports_op(nullptr, op); }
static bool dev_supports_buft(tsr_backend_dev_t, tsr_backend_buffer_type_t buft) { return be_supports_buft(nullptr, buft); }

/* Host memory is the CPU's memory: the buffer is the caller's block itself. */
static tsr_backend_buffer_t dev_buffer_from_host_ptr(tsr_backend_dev_t, void * ptr, size_t size, size_t) {
    return tsr_backend_cpu_buffer_from_ptr(ptr, size);
}

static const char * reg_get_name(tsr_backend_reg_t) { return "CPU"; }
static size_t reg_get_device_count(tsr_backend_reg_t) { return 1; }
static tsr_backend_dev_t reg_get_device(tsr_backend_reg_t, size_t) { return the_device(); }

/* Filled member by member (each entry names its member); what is left out is NULL. */
static struct tsr_backend_reg g_reg = [] {
    struct tsr_backend_reg r = {};
    r.api_version = TSR_BACKEND_API_VERSION;
    r.iface.get_name = reg_get_name;
    r.iface.get_device_count = reg_get_device_count;
    r.iface.get_device = reg_get_device;
    return r;
}();

static constexpr struct tsr_backend_device_i device_iface = [] {
    struct tsr_backend_device_i i = {};
    i.get_name = dev_get_name;
    i.get_description = dev_get_description;
    i.get_memory = dev_get_memory;
    i.get_type = dev_get_type;
    i.init_backend = dev_init_backend;
    i.get_buffer_type = dev_get_buffer_type;
    i.supports_op = dev_supports_op;
    i.supports_buft = dev_supports_buft;
    i.buffer_from_host_ptr = dev_buffer_from_host_ptr;
    return i;
}();
static struct tsr_backend_device g_device = {device_iface, &g_reg, nullptr};

static tsr_backend_dev_t the_device() { return &g_device; }

/* Registered while this file's statics are initialized: see registry.inl for why. */
[[maybe_unused]] static const bool g_registered = tsr_backend_register(&g_reg);

} // namespace tcpu
} // namespace

TSR_API_IMPL tsr_backend_reg_t tsr_backend_cpu_reg(void) { return &tcpu::g_reg; }
