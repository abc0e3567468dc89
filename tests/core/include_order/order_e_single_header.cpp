// Order (e): the committed single header (include/single), once without the macro (as a
// user header would), then again after it; Vulkan's single header first where compiled in.
#ifdef TSR_HAVE_VULKAN
#include "../../../include/single/tessera-vulkan.h"
#endif
#include "../../../include/single/tessera.h"
#define TSR_IMPLEMENTATION
#include "../../../include/single/tessera.h"
#include "program.h"

int main() { return run_order_program("e (single header, twice)"); }
