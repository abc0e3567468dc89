// The one translation unit of test_backend_ops that compiles tessera's implementation,
// the CPU backend (the reference and the ISA paths under test) and, when enabled, the
// Vulkan backend. The CUDA backend is the tessera::cuda library (its own .cu TU).
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#define TSR_VULKAN_IMPLEMENTATION
#include "tessera-vulkan.h"
#endif
