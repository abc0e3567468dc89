// mul_mat: dst[m, n, i12, i13] = sum_k A[k, m, i12/r2, i13/r3] * B[k, n, i12, i13].
// A_TYPE 0 F32, 1 F16 (strides in elements), >= 2 a quantized type of dequant.glsl (strides in
// bytes); B, dst F32.
// A rows m are [m0, m0 + M) of the full tensor (large weights are dispatched in chunks).
#define TSR_CUSTOM_PC 1
#include "common.glsl"
layout(push_constant) uniform PC {
    uint M, N, K, m0;
    uint nb01, nb02, nb03;
    uint nb11, nb12, nb13;
    uint nb1, nb2, nb3;
    uint ne12, r2, r3;
    int off0, off1, offd;
    uint pair0;                            // mul_mat_id: the first (slot, token) pair of the dispatch
    uint n_used, n_b, nb_ids1, n_expert;   // mul_mat_id (mul_mat_vec.comp's IDS)
    int off2;
} pc;
#if A_TYPE == 0
layout(binding = 0) readonly buffer A { float a[]; };
#elif A_TYPE == 1
layout(binding = 0) readonly buffer A { float16_t a[]; };
#else
layout(binding = 0) readonly buffer A { uint8_t a[]; };
#endif
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 3) buffer D { float d[]; };

#if A_TYPE >= 2
#define DQ_TYPE A_TYPE
#include "dequant.glsl"
#endif

// element k of the A row starting at `base`
float load_a(int base, uint k) {
#if A_TYPE <= 1
    return float(a[base + int(k)]);
#else
    return dq_value(base, k);
#endif
}

// A row base of row m (relative to the chunk) for batch (i12, i13)
int a_row(uint m, uint i12, uint i13) {
    return pc.off0 + int(m * pc.nb01 + (i12 / pc.r2) * pc.nb02 + (i13 / pc.r3) * pc.nb03);
}
