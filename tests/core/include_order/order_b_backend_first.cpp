// Order (b): backend.h first, then the macro and alloc.h (whose implementation needs the
// core's and backend.h's), then the rest.
#include "tessera/backend.h"
#define TSR_IMPLEMENTATION
#include "tessera/alloc.h"
#include "tessera/gguf.h"
#include "tessera/sched.h"
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"
#endif
#include "program.h"

int main() { return run_order_program("b (backend.h first)"); }
