// The CUDA backend's one translation unit (compiled by nvcc). The core implementation
// (TSR_IMPLEMENTATION) is compiled elsewhere, in a C++17 TU; see tessera-cuda.h.
#define TSR_CUDA_IMPLEMENTATION
#include "tessera-cuda.h"
