// The one translation unit of test_cuda that compiles tessera's core and CPU backend (the
// reference). The CUDA backend itself is the tessera::cuda library (its own .cu TU).
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
