// The one translation unit of tessera-run that compiles tessera's implementation.
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/gguf.h"
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#define TSR_VULKAN_IMPLEMENTATION
#include "tessera-vulkan.h"
#endif
