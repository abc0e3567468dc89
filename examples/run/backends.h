// backends.h - pick a backend by name: cpu, vulkan (TSR_HAVE_VULKAN), cuda (TSR_HAVE_CUDA).
#pragma once

#include "tessera/backend.h"
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"
#endif
#ifdef TSR_HAVE_CUDA
#include "tessera-cuda.h"
#endif

#include <string>

namespace trun {

// NULL + err when the backend is not built in or fails to start.
inline tsr_backend_t make_backend(const std::string & name, int device, int threads, std::string & err) {
    tsr_backend_t b = nullptr;
    if (name == "cpu") {
        b = tsr_backend_cpu_init();
        if (b && threads > 0) tsr_backend_cpu_set_n_threads(b, threads);
    } else if (name == "vulkan") {
#ifdef TSR_HAVE_VULKAN
        b = tsr_backend_vk_init(device);
#else
        (void) device;
        err = "this build has no Vulkan backend (configure with TSR_VULKAN=ON)";
        return nullptr;
#endif
    } else if (name == "cuda") {
#ifdef TSR_HAVE_CUDA
        b = tsr_backend_cuda_init(device);
#else
        (void) device;
        err = "this build has no CUDA backend (configure with TSR_CUDA=ON)";
        return nullptr;
#endif
    } else {
        err = "unknown backend '" + name + "'";
        return nullptr;
    }
    if (!b) err = "cannot start the " + name + " backend: " + tsr_last_error();
    return b;
}

} // namespace trun
