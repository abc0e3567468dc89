// TSR_STATIC copy #1 (with the implementation) - see static_b.cpp for the second copy.
// (Plain C API only: the C++ wrappers are inline and would mix the two copies.)
#define TSR_STATIC
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"

int tsr_test_static_b(void);

int main() {
    tsr_context * ctx = tsr_init(tsr_init_params{tsr_tensor_overhead() * 2, nullptr, false});
    if (!ctx) return 1;
    tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1000);  // data does not fit: fails cleanly
    const bool ok = t == nullptr && tsr_last_error()[0] != '\0';
    tsr_free(ctx);
    if (!ok) return 2;
    return tsr_test_static_b() == 0 ? 0 : 3;
}
