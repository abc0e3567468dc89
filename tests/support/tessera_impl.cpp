// The one implementation translation unit of tessera's own build: every test, example and
// benchmark links it (CMake: tessera_impl / tessera_impl_vulkan; meson: the same names).
// TSR_IMPLEMENTATION compiles the core and every backend header included here.
// TSR_IMPL_FROM_SINGLE_HEADER: compile it from the committed amalgamation instead
// (include/single), so the test suites run against the single header.
#define TSR_IMPLEMENTATION
#ifdef TSR_IMPL_FROM_SINGLE_HEADER
#include "tessera.h"                // include/single/tessera.h: core + CPU
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"         // include/single/tessera-vulkan.h
#endif
#else
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/gguf.h"
#include "tessera/sched.h"
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"
#endif
#endif
