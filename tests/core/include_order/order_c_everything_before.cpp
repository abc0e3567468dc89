// Order (c): every header (a backend header first) before the macro; the macro and one
// core header compile every part included so far.
#ifdef TSR_HAVE_VULKAN
#include "tessera-vulkan.h"
#endif
#include "tessera-cpu.h"
#include "tessera/gguf.h"
#include "tessera/sched.h"
#include "tessera/alloc.h"
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "program.h"

int main() { return run_order_program("c (everything before the macro)"); }
