// Order (a): a user header includes tessera.h; the TU then defines TSR_IMPLEMENTATION and
// includes tessera.h again, then the other headers.
#include "tessera/tessera.h"
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/gguf.h"
#include "tessera/sched.h"
#include "tessera-cpu.h"
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"
#endif
#include "program.h"

int main() { return run_order_program("a (core twice)"); }
