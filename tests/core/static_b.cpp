// TSR_STATIC copy #2: links into the same binary as static_a.cpp without symbol clashes.
#define TSR_STATIC
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"

int tsr_test_static_b(void) {
    tsr_context * ctx = tsr_init(tsr_init_params{tsr_tensor_overhead() + TSR_MEM_ALIGN, nullptr, false});
    if (!ctx) return 1;
    tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 16);
    const bool ok = t != nullptr && tsr_used_mem(ctx) == tsr_tensor_overhead() + TSR_MEM_ALIGN &&
                    tsr_last_error()[0] == '\0';  // this copy has its own error state
    tsr_free(ctx);
    return ok ? 0 : 1;
}
