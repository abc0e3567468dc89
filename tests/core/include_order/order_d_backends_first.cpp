// Order (d): the macro first, then backend headers before the core headers.
#define TSR_IMPLEMENTATION
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"
#endif
#include "tessera/gguf.h"
#include "tessera/sched.h"
#include "tessera/alloc.h"
#include "program.h"

int main() { return run_order_program("d (backends first)"); }
