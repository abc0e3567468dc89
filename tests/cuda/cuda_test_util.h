// Helpers for the CUDA tests: the CUDA backend (tests skip cleanly without a device).
// Building, filling, reading and comparing graphs is the shared test support
// (tests/support/backend_support.h); every op against the CPU backend is in backend_ops.
#pragma once

#include "backend_support.h"
#include "tessera-cuda.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace cudatest {

using namespace tsrt;

// One CUDA backend for the whole test run (NULL without a device; the reason is kept).
inline tsr_backend_t cuda() {
    static std::string why;
    static tsr_backend_t be = [] {
        tsr_backend_t b = tsr_backend_cuda_get_device_count() > 0 ? tsr_backend_cuda_init(0) : nullptr;
        if (!b) why = tsr_backend_cuda_get_device_count() > 0 ? tsr_last_error() : "no CUDA device (driver or GPU absent)";
        return b;
    }();
    // deliberately not freed at exit: the CUDA runtime may already be unloading then
    if (!be) tsr_set_error("%s", why.c_str());
    return be;
}

#define CUDA_OR_SKIP(be)                                                             \
    tsr_backend_t be = cudatest::cuda();                                             \
    if (!be) {                                                                       \
        WARN("skipped: no CUDA device: " << tsr_last_error());                       \
        return;                                                                      \
    }

} // namespace cudatest
