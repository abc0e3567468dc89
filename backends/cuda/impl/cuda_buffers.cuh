// tessera CUDA backend: device buffer types (cudaMalloc) and the pinned host buffer type.
#pragma once

namespace tsr_cuda {
namespace {

constexpr size_t CU_ALIGN = 256;

struct buft_ctx {
    int  device;
    char name[16];
};

struct buffer_ctx {
    int    device;
    void * ptr;
};

// ---- device buffers -----------------------------------------------------------------

void dev_buffer_free(tsr_backend_buffer_t buffer) {
    buffer_ctx * ctx = (buffer_ctx *) buffer->context;
    if (!ctx) return;
    cudaSetDevice(ctx->device);
    cudaFree(ctx->ptr);
    delete ctx;
}

void * dev_buffer_get_base(tsr_backend_buffer_t buffer) {
    return ((buffer_ctx *) buffer->context)->ptr;
}

bool dev_buffer_memset_tensor(tsr_backend_buffer_t buffer, tsr_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    buffer_ctx * ctx = (buffer_ctx *) buffer->context;
    TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
    TSR_CU_CHECK(cudaMemsetAsync((char *) tensor->data + offset, value, size, cudaStreamPerThread), ctx->device);
    TSR_CU_CHECK(cudaStreamSynchronize(cudaStreamPerThread), ctx->device);
    return true;
}

bool dev_buffer_set_tensor(tsr_backend_buffer_t buffer, tsr_tensor * tensor, const void * data, size_t offset, size_t size) {
    buffer_ctx * ctx = (buffer_ctx *) buffer->context;
    TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
    TSR_CU_CHECK(cudaMemcpyAsync((char *) tensor->data + offset, data, size, cudaMemcpyHostToDevice, cudaStreamPerThread), ctx->device);
    TSR_CU_CHECK(cudaStreamSynchronize(cudaStreamPerThread), ctx->device);
    return true;
}

bool dev_buffer_get_tensor(tsr_backend_buffer_t buffer, const tsr_tensor * tensor, void * data, size_t offset, size_t size) {
    buffer_ctx * ctx = (buffer_ctx *) buffer->context;
    TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
    TSR_CU_CHECK(cudaMemcpyAsync(data, (const char *) tensor->data + offset, size, cudaMemcpyDeviceToHost, cudaStreamPerThread), ctx->device);
    TSR_CU_CHECK(cudaStreamSynchronize(cudaStreamPerThread), ctx->device);
    return true;
}

bool buft_is_cuda_device(tsr_backend_buffer_type_t buft);

bool dev_buffer_cpy_tensor(tsr_backend_buffer_t buffer, const tsr_tensor * src, tsr_tensor * dst) {
    buffer_ctx * ctx = (buffer_ctx *) buffer->context;
    if (!src->buffer) return false;
    const size_t n = tsr_nbytes(src);
    if (buft_is_cuda_device(src->buffer->buft)) {
        const buffer_ctx * sctx = (const buffer_ctx *) src->buffer->context;
        TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
        if (sctx->device == ctx->device) {
            TSR_CU_CHECK(cudaMemcpyAsync(dst->data, src->data, n, cudaMemcpyDeviceToDevice, cudaStreamPerThread), ctx->device);
        } else {
            TSR_CU_CHECK(cudaMemcpyPeerAsync(dst->data, ctx->device, src->data, sctx->device, n, cudaStreamPerThread), ctx->device);
        }
        TSR_CU_CHECK(cudaStreamSynchronize(cudaStreamPerThread), ctx->device);
        return true;
    }
    if (tsr_backend_buft_is_host(src->buffer->buft)) {
        return dev_buffer_set_tensor(buffer, dst, src->data, 0, n);
    }
    return false;
}

void dev_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    buffer_ctx * ctx = (buffer_ctx *) buffer->context;
    if (cudaSetDevice(ctx->device) != cudaSuccess) return;
    cudaMemsetAsync(ctx->ptr, value, buffer->size, cudaStreamPerThread);
    cudaStreamSynchronize(cudaStreamPerThread);
}

// The interfaces below are filled member by member: each entry names its member, and
// what one leaves unset is NULL.
constexpr tsr_backend_buffer_i dev_buffer_iface = [] {
    tsr_backend_buffer_i b = {};
    b.free_buffer = dev_buffer_free;
    b.get_base = dev_buffer_get_base;
    b.memset_tensor = dev_buffer_memset_tensor;
    b.set_tensor = dev_buffer_set_tensor;
    b.get_tensor = dev_buffer_get_tensor;
    b.cpy_tensor = dev_buffer_cpy_tensor;
    b.clear = dev_buffer_clear;
    return b;
}();

// ---- device buffer type ---------------------------------------------------------------

const char * dev_buft_get_name(tsr_backend_buffer_type_t buft) {
    return ((buft_ctx *) buft->context)->name;
}

tsr_backend_buffer_t dev_buft_alloc_buffer(tsr_backend_buffer_type_t buft, size_t size) {
    buft_ctx * bctx = (buft_ctx *) buft->context;
    const int device = bctx->device;
    cudaError_t err = cudaSetDevice(device);
    void * ptr = nullptr;
    const size_t alloc = std::max(size, CU_ALIGN);   // never cudaMalloc(0)
    if (err == cudaSuccess) err = cudaMalloc(&ptr, alloc);
    if (err != cudaSuccess) {
        cudaGetLastError();  // clear the sticky-free error state
        tsr_set_error("cuda: cudaMalloc(%zu bytes) for buffer type %s failed: %s (%s)",
                      alloc, bctx->name, cudaGetErrorString(err), cudaGetErrorName(err));
        return nullptr;
    }
    buffer_ctx * ctx = new (std::nothrow) buffer_ctx{device, ptr};
    if (!ctx) { cudaFree(ptr); tsr_set_error("cuda: out of host memory for a buffer context"); return nullptr; }
    tsr_backend_buffer_t buf = tsr_backend_buffer_init(buft, dev_buffer_iface, ctx, size);
    if (!buf) { cudaFree(ptr); delete ctx; return nullptr; }
    return buf;
}

size_t dev_buft_get_alignment(tsr_backend_buffer_type_t) { return CU_ALIGN; }

size_t dev_buft_get_max_size(tsr_backend_buffer_type_t) { return SIZE_MAX; }

bool dev_buft_is_host(tsr_backend_buffer_type_t) { return false; }

constexpr tsr_backend_buffer_type_i dev_buft_iface = [] {
    tsr_backend_buffer_type_i t = {};
    t.get_name = dev_buft_get_name;
    t.alloc_buffer = dev_buft_alloc_buffer;
    t.get_alignment = dev_buft_get_alignment;
    t.get_max_size = dev_buft_get_max_size;
    t.is_host = dev_buft_is_host;
    return t;
}();

buft_ctx            g_buft_ctx[TSR_CUDA_MAX_DEVICES];
tsr_backend_buffer_type g_buft[TSR_CUDA_MAX_DEVICES];
std::once_flag      g_buft_once;

void init_bufts() {
    std::call_once(g_buft_once, [] {
        for (int i = 0; i < TSR_CUDA_MAX_DEVICES; ++i) {
            g_buft_ctx[i].device = i;
            snprintf(g_buft_ctx[i].name, sizeof(g_buft_ctx[i].name), "CUDA%d", i);
            g_buft[i].iface = dev_buft_iface;
            g_buft[i].context = &g_buft_ctx[i];
        }
    });
}

bool buft_is_cuda_device(tsr_backend_buffer_type_t buft) {
    return buft && buft->iface.alloc_buffer == dev_buft_alloc_buffer;
}

// ---- pinned host buffers ----------------------------------------------------------------

void host_buffer_free(tsr_backend_buffer_t buffer) {
    cudaFreeHost(buffer->context);
}
void * host_buffer_get_base(tsr_backend_buffer_t buffer) { return buffer->context; }
bool host_buffer_memset_tensor(tsr_backend_buffer_t, tsr_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    memset((char *) tensor->data + offset, value, size);
    return true;
}
bool host_buffer_set_tensor(tsr_backend_buffer_t, tsr_tensor * tensor, const void * data, size_t offset, size_t size) {
    memcpy((char *) tensor->data + offset, data, size);
    return true;
}
bool host_buffer_get_tensor(tsr_backend_buffer_t, const tsr_tensor * tensor, void * data, size_t offset, size_t size) {
    memcpy(data, (const char *) tensor->data + offset, size);
    return true;
}
bool host_buffer_cpy_tensor(tsr_backend_buffer_t, const tsr_tensor * src, tsr_tensor * dst) {
    if (!src->buffer || !tsr_backend_buft_is_host(src->buffer->buft)) return false;
    memcpy(dst->data, src->data, tsr_nbytes(src));
    return true;
}
void host_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    memset(buffer->context, value, buffer->size);
}

constexpr tsr_backend_buffer_i host_buffer_iface = [] {
    tsr_backend_buffer_i b = {};
    b.free_buffer = host_buffer_free;
    b.get_base = host_buffer_get_base;
    b.memset_tensor = host_buffer_memset_tensor;
    b.set_tensor = host_buffer_set_tensor;
    b.get_tensor = host_buffer_get_tensor;
    b.cpy_tensor = host_buffer_cpy_tensor;
    b.clear = host_buffer_clear;
    return b;
}();

const char * host_buft_get_name(tsr_backend_buffer_type_t) { return "CUDA_Host"; }

tsr_backend_buffer_t host_buft_alloc_buffer(tsr_backend_buffer_type_t buft, size_t size) {
    void * ptr = nullptr;
    const size_t alloc = std::max(size, CU_ALIGN);
    cudaError_t err = cudaMallocHost(&ptr, alloc);
    if (err != cudaSuccess) {
        cudaGetLastError();
        tsr_set_error("cuda: cudaMallocHost(%zu bytes) for buffer type CUDA_Host failed: %s (%s)",
                      alloc, cudaGetErrorString(err), cudaGetErrorName(err));
        return nullptr;
    }
    tsr_backend_buffer_t buf = tsr_backend_buffer_init(buft, host_buffer_iface, ptr, size);
    if (!buf) cudaFreeHost(ptr);
    return buf;
}

bool host_buft_is_host(tsr_backend_buffer_type_t) { return true; }

tsr_backend_buffer_type g_host_buft = [] {
    tsr_backend_buffer_type t = {};
    t.iface.get_name = host_buft_get_name;
    t.iface.alloc_buffer = host_buft_alloc_buffer;
    t.iface.get_alignment = dev_buft_get_alignment;
    t.iface.get_max_size = dev_buft_get_max_size;
    t.iface.is_host = host_buft_is_host;
    return t;
}();

} // namespace
} // namespace tsr_cuda

// ---- public API ---------------------------------------------------------------------------

extern "C" {

TSR_API_IMPL int tsr_backend_cuda_get_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return std::min(n, TSR_CUDA_MAX_DEVICES);
}

TSR_API_IMPL bool tsr_backend_cuda_get_device_description(int device, char * desc, size_t size) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) { cudaGetLastError(); return tsr_cuda::cu_fail(err, "cudaGetDeviceCount", device); }
    if (device < 0 || device >= n) return tsr_set_error("cuda: device %d does not exist (%d devices)", device, n);
    cudaDeviceProp prop;
    TSR_CU_CHECK(cudaGetDeviceProperties(&prop, device), device);
    if (desc && size) {
        snprintf(desc, size, "%s (sm_%d%d, %d SMs, %.0f GiB)", prop.name, prop.major, prop.minor,
                 prop.multiProcessorCount, (double) prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    }
    return true;
}

TSR_API_IMPL bool tsr_backend_cuda_get_device_memory(int device, size_t * free_bytes, size_t * total_bytes) {
    size_t f = 0, t = 0;
    cudaError_t err = cudaSetDevice(device);
    if (err == cudaSuccess) err = cudaMemGetInfo(&f, &t);
    if (err != cudaSuccess) { cudaGetLastError(); return tsr_cuda::cu_fail(err, "cudaMemGetInfo", device); }
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return true;
}

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_cuda_buffer_type(int device) {
    if (device < 0 || device >= TSR_CUDA_MAX_DEVICES) {
        tsr_set_error("cuda: buffer type for device %d requested; devices are 0..%d", device, TSR_CUDA_MAX_DEVICES - 1);
        return nullptr;
    }
    tsr_cuda::init_bufts();
    return &tsr_cuda::g_buft[device];
}

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_cuda_host_buffer_type(void) {
    return &tsr_cuda::g_host_buft;
}

TSR_API_IMPL bool tsr_backend_buft_is_cuda(tsr_backend_buffer_type_t buft) {
    return tsr_cuda::buft_is_cuda_device(buft) || buft == &tsr_cuda::g_host_buft;
}

} // extern "C"
