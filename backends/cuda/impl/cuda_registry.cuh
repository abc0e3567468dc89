// cuda_registry.cuh - the CUDA devices and their backend kind in the registry (backend.h):
// "CUDA<index>" in the runtime's order, all of type GPU. The device list is read on the
// first question (cudaGetDeviceCount), never while statics are initialized.

namespace tsr_cuda {
namespace {

struct registry_state {
    int n = 0;
    tsr_backend_device devs[TSR_CUDA_MAX_DEVICES] = {};
    char names[TSR_CUDA_MAX_DEVICES][24] = {};
    char descs[TSR_CUDA_MAX_DEVICES][640] = {};   // room for the longest description (a 256-byte name and the numbers)
};

registry_state & reg_state();
tsr_backend_reg_t the_reg();

int dev_index(tsr_backend_dev_t dev) { return static_cast<int>(reinterpret_cast<intptr_t>(dev->context)); }

const char * dev_get_name(tsr_backend_dev_t dev) { return reg_state().names[dev_index(dev)]; }
const char * dev_get_description(tsr_backend_dev_t dev) { return reg_state().descs[dev_index(dev)]; }
void dev_get_memory(tsr_backend_dev_t dev, size_t * free, size_t * total) {
    if (!tsr_backend_cuda_get_device_memory(dev_index(dev), free, total)) *free = *total = 0;
}
enum tsr_backend_dev_type dev_get_type(tsr_backend_dev_t) { return TSR_BACKEND_DEVICE_TYPE_GPU; }
// params: NULL, "", "graph_capture=0" or "graph_capture=1" (tsr_backend_cuda_set_graph_capture
// for programs that reach the backend through the registry only, as tessera-run does).
tsr_backend_t dev_init_backend(tsr_backend_dev_t dev, const char * params) {
    int capture = -1;
    if (params && *params) {
        if (!strcmp(params, "graph_capture=0")) capture = 0;
        else if (!strcmp(params, "graph_capture=1")) capture = 1;
        else {
            tsr_set_error("CUDA device %s: params '%s' not understood (it takes graph_capture=0|1)", dev_get_name(dev), params);
            return nullptr;
        }
    }
    tsr_backend_t b = tsr_backend_cuda_init(dev_index(dev));
    if (b && capture >= 0) tsr_backend_cuda_set_graph_capture(b, capture == 1);
    return b;
}
tsr_backend_buffer_type_t dev_get_buffer_type(tsr_backend_dev_t dev) { return tsr_backend_cuda_buffer_type(dev_index(dev)); }
tsr_backend_buffer_type_t dev_get_host_buffer_type(tsr_backend_dev_t) { return tsr_backend_cuda_host_buffer_type(); }
bool dev_supports_op(tsr_backend_dev_t, const tsr_tensor * op) { return supports(op); }
bool dev_supports_buft(tsr_backend_dev_t dev, tsr_backend_buffer_type_t buft) { return device_uses_buft(dev_index(dev), buft); }
bool dev_offload_op(tsr_backend_dev_t, const tsr_tensor * op) { return tsr_backend_offload_by_batch(op) && supports(op); }

const char * reg_get_name(tsr_backend_reg_t) { return "CUDA"; }
size_t reg_get_device_count(tsr_backend_reg_t) { return static_cast<size_t>(reg_state().n); }
tsr_backend_dev_t reg_get_device(tsr_backend_reg_t, size_t i) { return &reg_state().devs[i]; }

// Filled member by member (each entry names its member); what is left out is NULL.
tsr_backend_reg g_reg = [] {
    tsr_backend_reg r = {};
    r.api_version = TSR_BACKEND_API_VERSION;
    r.iface.get_name = reg_get_name;
    r.iface.get_device_count = reg_get_device_count;
    r.iface.get_device = reg_get_device;
    return r;
}();
tsr_backend_reg_t the_reg() { return &g_reg; }

// One table for every CUDA device: the context tells them apart (the device index).
constexpr tsr_backend_device_i device_iface = [] {
    tsr_backend_device_i i = {};
    i.get_name = dev_get_name;
    i.get_description = dev_get_description;
    i.get_memory = dev_get_memory;
    i.get_type = dev_get_type;
    i.init_backend = dev_init_backend;
    i.get_buffer_type = dev_get_buffer_type;
    i.get_host_buffer_type = dev_get_host_buffer_type;
    i.supports_op = dev_supports_op;
    i.supports_buft = dev_supports_buft;
    i.offload_op = dev_offload_op;
    return i;
}();

registry_state make_registry_state() {
    registry_state st;
    st.n = std::min(tsr_backend_cuda_get_device_count(), TSR_CUDA_MAX_DEVICES);
    for (int i = 0; i < st.n; ++i) {
        snprintf(st.names[i], sizeof st.names[i], "CUDA%d", i);
        if (!tsr_backend_cuda_get_device_description(i, st.descs[i], sizeof st.descs[i])) snprintf(st.descs[i], sizeof st.descs[i], "?");
        st.devs[i] = tsr_backend_device{device_iface, the_reg(), reinterpret_cast<void *>(static_cast<intptr_t>(i))};
    }
    return st;
}

registry_state & reg_state() {
    static registry_state st = make_registry_state();
    return st;
}

tsr_backend_dev_t registry_device(int index) {
    registry_state & st = reg_state();
    return index >= 0 && index < st.n ? &st.devs[index] : nullptr;
}

// Registered while this file's statics are initialized (the one-nvcc-TU set-up); a
// separate CUDA library is also asked for by the registry itself (registry.inl).
[[maybe_unused]] const bool g_registered = tsr_backend_register(&g_reg);

} // namespace
} // namespace tsr_cuda

extern "C" {
TSR_API_IMPL tsr_backend_reg_t tsr_backend_cuda_reg(void) { return &tsr_cuda::g_reg; }
}
