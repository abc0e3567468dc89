// The one translation unit of test_vulkan that compiles tessera's implementation,
// the CPU backend (the reference) and the Vulkan backend.
#define TSR_IMPLEMENTATION
#define TSR_VULKAN_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
#include "tessera-vulkan.h"
