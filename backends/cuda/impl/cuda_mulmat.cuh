// tessera CUDA backend: mul_mat.
//
//   dst[M, N, B2, B3] (F32) = src0[K, M, A2, A3] . src1[K, N, B2, B3]  (src0 broadcast over
//   dims 2-3). Paths, chosen by plan_mul_mat() (which also sizes the node's workspace):
//   - F32 src0: cuBLAS SGEMM-equivalent (cublasGemm[StridedBatched]Ex, compute 32F, or
//     32F_FAST_TF32 when the backend allows TF32). src1 used in place when its rows are
//     contiguous, else copied to F32 in the workspace.
//   - F16 (BF16) src0: cuBLAS with F16 (BF16) inputs and F32 accumulation/output (tensor
//     cores); src1 of the same type used in place, otherwise converted in the workspace.
//   - Q8_0 / Q4_0 src0, src1 with <= 8 columns: src1 quantized to 8 bits per 32-block
//     (scale d and d*sum per block, ggml's q8_1), then k_mmvq: one warp per R rows, rows
//     staged through shared memory with 16-byte loads, dequantized in registers, dp4a dot
//     products. Needs 16-byte aligned rows and K % 256 == 0; otherwise k_mmvq_generic.
//   - Q8_0 / Q4_0 with more columns: weights dequantized to F16 in the workspace, src1
//     converted to F16, then the F16 cuBLAS path.
//   - the other quantized types (cuda_dequant.cuh: Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K), F32
//     src1 with <= 8 columns: src1 quantized as for Q8_0 / Q4_0, then k_mmv_dqx: one warp per
//     R rows, a lane per 32-element slice (a block, or an eighth of a K-quant super-block)
//     decoded to int8 words and scales by cuda_dqdot.cuh, dp4a dot products. Needs rows
//     aligned as their blocks are (dqx_align: 16, 4 or 2 bytes); otherwise k_mmv_dq, one
//     warp per row dequantizing element by element (dq_value) against the F32 activations.
//     With more columns the F16 cuBLAS path as for Q8_0 / Q4_0.
#pragma once

namespace tsr_cuda {
namespace {

constexpr int MMVQ_MAX_COLS = 8;
constexpr int MMVQ_WARPS = 8;

// ---- activation quantization (q8_1-like: int8 values, per block d and d*sum) ------------

// x: F32 src1 [K, N, B2, B3] (rows contiguous); xq int8 [ncols][K]; xds float2 [ncols][K/32].
__global__ void k_quantize_x(const char * x, tdesc dx, int8_t * xq, float2 * xds, int64_t nblk_total) {
    const int64_t t = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t blk = t >> 5;
    const int lane = threadIdx.x & 31;
    if (blk >= nblk_total) return;   // whole warps exit together (blockDim multiple of 32)
    const int64_t K = dx.ne[0], nblk = K / 32;
    const int64_t col = blk / nblk, b = blk % nblk;
    const int64_t i1 = col % dx.ne[1], i2 = (col / dx.ne[1]) % dx.ne[2], i3 = col / (dx.ne[1] * dx.ne[2]);
    const float v = *(const float *) (x + (b * 32 + lane) * dx.nb[0] + i1 * dx.nb[1] + i2 * dx.nb[2] + i3 * dx.nb[3]);
    const float amax = warp_max(fabsf(v));
    // fmaxf drops a NaN, and rintf(NaN) converts to 0: without this a NaN in x would vanish
    // (the CPU's column is NaN, docs/ops.md)
    const float d = __any_sync(0xffffffffu, isnan(v)) ? NAN : amax / 127.0f;
    const int q = d > 0.0f ? (int) rintf(v / d) : 0;
    xq[col * K + b * 32 + lane] = (int8_t) q;
    const float s = warp_sum((float) q);
    if (lane == 0) xds[blk] = make_float2(d, d * s);
}

// ---- quantized matrix-vector ---------------------------------------------------------------

template <int TYPE> struct qtraits;
template <> struct qtraits<TSR_TYPE_Q4_0> { static constexpr int bytes = 18; static constexpr int words = 5; static constexpr int qwords = 4; };
template <> struct qtraits<TSR_TYPE_Q8_0> { static constexpr int bytes = 34; static constexpr int words = 9; static constexpr int qwords = 8; };

__device__ __forceinline__ float half_bits_to_f32(uint32_t bits) {
    return __half2float(__ushort_as_half((unsigned short) (bits & 0xFFFFu)));
}

// Dot of one weight block (given as its d and its quant words) with one quantized x block.
template <int TYPE>
__device__ __forceinline__ float block_dot(float dw, const uint32_t * qw, const int * xw, float2 xd) {
    int isum = 0;
    if (TYPE == TSR_TYPE_Q4_0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            isum = __dp4a((int) (qw[i] & 0x0F0F0F0Fu), xw[i], isum);
            isum = __dp4a((int) ((qw[i] >> 4) & 0x0F0F0F0Fu), xw[i + 4], isum);
        }
        return dw * (xd.x * (float) isum - 8.0f * xd.y);
    } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) isum = __dp4a((int) qw[i], xw[i], isum);
        return dw * xd.x * (float) isum;
    }
}

// Decode block `lane` of a chunk staged in shared memory (chunk start 16-byte aligned):
// 32-bit aligned reads, realigned with byte_perm when the block starts at 2 mod 4.
template <int TYPE>
__device__ __forceinline__ void decode_block_smem(const uint32_t * sw, int lane, float & dw, uint32_t * qw) {
    constexpr int BS = qtraits<TYPE>::bytes, NW = qtraits<TYPE>::words, NQ = qtraits<TYPE>::qwords;
    const int o = lane * BS;
    const uint32_t * p = sw + (o >> 2);
    uint32_t w[NW];
#pragma unroll
    for (int i = 0; i < NW; ++i) w[i] = p[i];
    if ((o & 3) == 0) {
        dw = half_bits_to_f32(w[0]);
#pragma unroll
        for (int i = 0; i < NQ; ++i) qw[i] = __byte_perm(w[i], w[i + 1], 0x5432);
    } else {
        dw = half_bits_to_f32(w[0] >> 16);
#pragma unroll
        for (int i = 0; i < NQ; ++i) qw[i] = w[i + 1];
    }
}

template <int NC> struct mmvq_rows { static constexpr int value = NC == 1 ? 4 : (NC <= 4 ? 2 : 1); };

// Activation block b of the NC columns: its 8 int8 x 4 words and its (d, d * sum).
template <int NC>
__device__ __forceinline__ void load_x_blocks(const int8_t * __restrict__ xq, const float2 * __restrict__ xds, int64_t K, int nblk, int b,
                                              int (&xw)[NC][8], float2 (&xd)[NC]) {
#pragma unroll
    for (int n = 0; n < NC; ++n) {
        const int4 * px = (const int4 *) (xq + n * K + (int64_t) b * 32);
        const int4 u = __ldg(px), v = __ldg(px + 1);
        xw[n][0] = u.x; xw[n][1] = u.y; xw[n][2] = u.z; xw[n][3] = u.w;
        xw[n][4] = v.x; xw[n][5] = v.y; xw[n][6] = v.z; xw[n][7] = v.w;
        xd[n] = __ldg(xds + (int64_t) n * nblk + b);
    }
}

// The warp's sums of acc to y[n * ldy + row0 + r], rows below M.
template <int R, int NC>
__device__ __forceinline__ void store_rows(const float (&acc)[R][NC], int lane, int64_t row0, int64_t M, float * y, int64_t ldy) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < NC; ++n) {
            const float s = warp_sum(acc[r][n]);
            if (lane == 0 && row0 + r < M) y[n * ldy + row0 + r] = s;
        }
}

// y[col * ldy + row] = sum_k W[row, k] x[col, k] for rows [0, M), cols [0, NC).
template <int TYPE, int NC>
__global__ void __launch_bounds__(MMVQ_WARPS * 32, NC <= 2 ? 3 : 2)
k_mmvq(const char * __restrict__ W, int64_t row_bytes, int nblk, int64_t M,
       const int8_t * __restrict__ xq, const float2 * __restrict__ xds, int64_t K, float * y, int64_t ldy) {
    constexpr int R = mmvq_rows<NC>::value;
    constexpr int BS = qtraits<TYPE>::bytes;
    constexpr int CHUNK_U4 = 32 * BS / 16;            // 36 (Q4_0) or 68 (Q8_0)
    constexpr int LOADS = (CHUNK_U4 + 31) / 32;
    __shared__ uint4 sm[MMVQ_WARPS][R][CHUNK_U4];

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row0 = ((int64_t) blockIdx.x * MMVQ_WARPS + warp) * R;
    if (row0 >= M) return;

    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < NC; ++n) acc[r][n] = 0.0f;

    for (int c = 0; c < nblk; c += 32) {
        const int nb = min(32, nblk - c);          // a multiple of 8
        const int nu4 = nb * BS / 16;
        uint4 v[R][LOADS];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const uint4 * src = (const uint4 *) (W + (row0 + r) * row_bytes + (int64_t) c * BS);
            const bool ok = row0 + r < M;
#pragma unroll
            for (int k = 0; k < LOADS; ++k) {
                const int idx = lane + 32 * k;
                if (ok && idx < nu4) v[r][k] = __ldg(src + idx);
            }
        }
        int xw[NC][8];
        float2 xd[NC];
        if (lane < nb) load_x_blocks<NC>(xq, xds, K, nblk, c + lane, xw, xd);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int k = 0; k < LOADS; ++k) {
                const int idx = lane + 32 * k;
                if (idx < nu4) sm[warp][r][idx] = v[r][k];
            }
        __syncwarp();
        if (lane < nb) {
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float dw;
                uint32_t qw[qtraits<TYPE>::qwords];
                decode_block_smem<TYPE>((const uint32_t *) sm[warp][r], lane, dw, qw);
#pragma unroll
                for (int n = 0; n < NC; ++n) acc[r][n] += block_dot<TYPE>(dw, qw, xw[n], xd[n]);
            }
        }
        __syncwarp();
    }
    store_rows<R, NC>(acc, lane, row0, M, y, ldy);
}

// Any alignment, any K % 32 == 0: one warp per row, lane per block, byte loads.
template <int TYPE, int NC>
__global__ void k_mmvq_generic(const char * __restrict__ W, int64_t row_bytes, int nblk, int64_t M,
                               const int8_t * __restrict__ xq, const float2 * __restrict__ xds, int64_t K, float * y, int64_t ldy) {
    constexpr int BS = qtraits<TYPE>::bytes;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row = (int64_t) blockIdx.x * (blockDim.x >> 5) + warp;
    if (row >= M) return;
    float acc[NC];
#pragma unroll
    for (int n = 0; n < NC; ++n) acc[n] = 0.0f;
    const unsigned char * rp = (const unsigned char *) W + row * row_bytes;
    for (int b = lane; b < nblk; b += 32) {
        const unsigned char * p = rp + (int64_t) b * BS;
        const float dw = half_bits_to_f32((uint32_t) p[0] | ((uint32_t) p[1] << 8));
        uint32_t qw[qtraits<TYPE>::qwords];
#pragma unroll
        for (int i = 0; i < qtraits<TYPE>::qwords; ++i)
            qw[i] = (uint32_t) p[2 + 4 * i] | ((uint32_t) p[3 + 4 * i] << 8) | ((uint32_t) p[4 + 4 * i] << 16) | ((uint32_t) p[5 + 4 * i] << 24);
#pragma unroll
        for (int n = 0; n < NC; ++n) {
            const int * px = (const int *) (xq + n * K + (int64_t) b * 32);
            int xw[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) xw[i] = px[i];
            acc[n] += block_dot<TYPE>(dw, qw, xw, xds[(int64_t) n * nblk + b]);
        }
    }
#pragma unroll
    for (int n = 0; n < NC; ++n) {
        const float s = warp_sum(acc[n]);
        if (lane == 0) y[n * ldy + row] = s;
    }
}

// ---- dp4a matrix-vector of the cuda_dequant.cuh types (slices decoded by cuda_dqdot.cuh) ----

// y[col * ldy + row] = sum_k W[row, k] x[col, k] for rows [0, M), cols [0, NC): one warp per
// R rows, lane l takes the 32-element slices l, l + 32, ... of each row (K-quants: 8 lanes
// per super-block), decodes each once and dots it with the NC columns' activation blocks.
// Rows aligned to dqx_traits<TYPE>::align (row_bytes and W).
template <int TYPE, int NC>
__global__ void __launch_bounds__(MMVQ_WARPS * 32)
k_mmv_dqx(const char * __restrict__ W, int64_t row_bytes, int nblk, int64_t M,
          const int8_t * __restrict__ xq, const float2 * __restrict__ xds, int64_t K, float * y, int64_t ldy) {
    constexpr int R = mmvq_rows<NC>::value;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int64_t row0 = ((int64_t) blockIdx.x * MMVQ_WARPS + warp) * R;
    if (row0 >= M) return;   // whole warps exit together
    const uint8_t * rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = (const uint8_t *) W + (row0 + r < M ? row0 + r : M - 1) * row_bytes;   // past M: row M-1 again, not stored

    float acc[R][NC];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < NC; ++n) acc[r][n] = 0.0f;

    for (int b = lane; b < nblk; b += 32) {
        int xw[NC][8];
        float2 xd[NC];
        load_x_blocks<NC>(xq, xds, K, nblk, b, xw, xd);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            dq_slice s;
            dq_decode<TYPE>(rows[r], b, s);
#pragma unroll
            for (int n = 0; n < NC; ++n) acc[r][n] += dq_dot<TYPE>(s, xw[n], xd[n].x, xd[n].y);
        }
    }
    store_rows<R, NC>(acc, lane, row0, M, y, ldy);
}

// The kernels on quantized activations: Q4_0 / Q8_0 (fast: k_mmvq, else k_mmvq_generic) and
// the cuda_dequant.cuh types (k_mmv_dqx; plan_mul_mat checked the rows' alignment).
template <int TYPE, int NC>
void launch_mmvq_nc(op_ctx & c, bool fast, const char * W, int64_t row_bytes, int nblk, int64_t M,
                    const int8_t * xq, const float2 * xds, int64_t K, float * y, int64_t ldy) {
    if constexpr (TYPE != TSR_TYPE_Q4_0 && TYPE != TSR_TYPE_Q8_0) {
        (void) fast;
        constexpr int64_t rows_per_block = (int64_t) MMVQ_WARPS * mmvq_rows<NC>::value;
        const unsigned g = (unsigned) ((M + rows_per_block - 1) / rows_per_block);
        k_mmv_dqx<TYPE, NC><<<g, MMVQ_WARPS * 32, 0, c.stream>>>(W, row_bytes, nblk, M, xq, xds, K, y, ldy);
    } else if (fast) {
        constexpr int R = mmvq_rows<NC>::value;
        const int64_t rows_per_block = (int64_t) MMVQ_WARPS * R;
        const unsigned g = (unsigned) ((M + rows_per_block - 1) / rows_per_block);
        k_mmvq<TYPE, NC><<<g, MMVQ_WARPS * 32, 0, c.stream>>>(W, row_bytes, nblk, M, xq, xds, K, y, ldy);
    } else {
        const unsigned g = (unsigned) ((M + 7) / 8);
        k_mmvq_generic<TYPE, NC><<<g, 256, 0, c.stream>>>(W, row_bytes, nblk, M, xq, xds, K, y, ldy);
    }
}

template <int TYPE>
void launch_mmvq_t(op_ctx & c, int ncols, bool fast, const char * W, int64_t row_bytes, int nblk, int64_t M,
                   const int8_t * xq, const float2 * xds, int64_t K, float * y, int64_t ldy) {
    switch (ncols) {
        case 1: launch_mmvq_nc<TYPE, 1>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        case 2: launch_mmvq_nc<TYPE, 2>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        case 3: launch_mmvq_nc<TYPE, 3>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        case 4: launch_mmvq_nc<TYPE, 4>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        case 5: launch_mmvq_nc<TYPE, 5>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        case 6: launch_mmvq_nc<TYPE, 6>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        case 7: launch_mmvq_nc<TYPE, 7>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
        default: launch_mmvq_nc<TYPE, 8>(c, fast, W, row_bytes, nblk, M, xq, xds, K, y, ldy); break;
    }
}

// ---- dequantizing matrix-vector (the types of cuda_dequant.cuh) -----------------------------

// y[col * ldy + row] = sum_k W[row, k] x[col, k] for rows [0, M), cols [0, ncols): one warp
// per row, values dequantized on the fly (the fallback of k_mmv_dqx for misaligned rows).
template <int TYPE>
__global__ void k_mmv_dq(const char * __restrict__ W, int64_t row_bytes, int64_t M, const float * __restrict__ x, int64_t ldx,
                         int ncols, int64_t K, float * y, int64_t ldy) {
    const int64_t row = (int64_t) blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x & 31;
    if (row >= M) return;   // whole warps exit together
    const char * w = W + row * row_bytes;
    float acc[MMVQ_MAX_COLS] = {};
    for (int64_t k = lane; k < K; k += 32) {
        const float v = dq_value<TYPE>(w, k);
#pragma unroll
        for (int n = 0; n < MMVQ_MAX_COLS; ++n)
            if (n < ncols) acc[n] += v * x[n * ldx + k];
    }
#pragma unroll
    for (int n = 0; n < MMVQ_MAX_COLS; ++n) {
        if (n >= ncols) break;
        const float s = warp_sum(acc[n]);
        if (lane == 0) y[n * ldy + row] = s;
    }
}

// ---- dequantize to F16 (for the cuBLAS path of quantized weights) ---------------------------

template <int TYPE>
__global__ void k_dequant_f16(const char * src, tdesc ds, __half * dst, int64_t n) {
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t) gridDim.x * blockDim.x) {
        const idx4 x = unravel(i, ds.ne);
        const char * row = src + offs(ds, idx4{0, x.i1, x.i2, x.i3});
        dst[i] = __float2half_rn(load_elem<TYPE>(row, x.i0));
    }
}

// ---- planning --------------------------------------------------------------------------------

enum mm_path { MM_CUBLAS, MM_MMVQ, MM_MMVQ_GENERIC, MM_MMV_DQX, MM_MMV_DQ };

struct mm_plan {
    mm_path path;
    tsr_type gemm_type;   // F32 or F16 (cuBLAS paths)
    bool copy_a;          // src0 copied/converted/dequantized into the workspace
    bool copy_b;          // src1 copied/converted into the workspace
    size_t a_bytes, b_bytes, xq_bytes, xds_bytes;
    size_t total;         // workspace bytes (each piece 256-byte rounded)
};

// Can a tensor be handed to cuBLAS as is: elements contiguous, rows and batches at
// whole-element strides, leading dimension >= row length.
inline bool gemm_operand_ok(const tsr_tensor * t) {
    const size_t es = tsr_type_size(t->type);
    return t->nb[0] == es && t->nb[1] % es == 0 && t->nb[2] % es == 0 && t->nb[3] % es == 0 &&
           t->nb[1] / es >= (size_t) t->ne[0] && ((uintptr_t) t->data % es) == 0;
}

inline mm_plan plan_mul_mat(const tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    mm_plan p;
    memset(&p, 0, sizeof(p));
    const int64_t nb_elems = tsr_nelements(b);
    const int64_t na_elems = tsr_nelements(a);
    const bool few_f32_cols = b->ne[1] <= MMVQ_MAX_COLS && b->type == TSR_TYPE_F32 && b->nb[0] == sizeof(float);
    auto rows_aligned = [a](size_t n) {
        return a->nb[1] % n == 0 && a->nb[2] % n == 0 && a->nb[3] % n == 0 && ((uintptr_t) a->data % n) == 0;
    };
    if (is_dq_type(a->type) && few_f32_cols && !rows_aligned((size_t) dqx_align(a->type))) {
        p.path = MM_MMV_DQ;
        return p;
    }
    if (tsr_is_quantized(a->type)) {
        if (few_f32_cols && (a->type == TSR_TYPE_Q8_0 || a->type == TSR_TYPE_Q4_0 || is_dq_type(a->type))) {
            const int64_t K = a->ne[0];
            if (is_dq_type(a->type)) p.path = MM_MMV_DQX;   // K a whole number of blocks: of 32 (256)
            else p.path = K % 256 == 0 && rows_aligned(16) ? MM_MMVQ : MM_MMVQ_GENERIC;
            const int64_t ncols = b->ne[1] * b->ne[2] * b->ne[3];
            p.xq_bytes = (size_t) (ncols * K);
            p.xds_bytes = (size_t) (ncols * (K / 32)) * sizeof(float2);
            p.total = ws_round(p.xq_bytes) + ws_round(p.xds_bytes);
            return p;
        }
        p.path = MM_CUBLAS;
        p.gemm_type = TSR_TYPE_F16;
        p.copy_a = true;
        p.a_bytes = (size_t) na_elems * sizeof(__half);
        p.copy_b = !(b->type == TSR_TYPE_F16 && gemm_operand_ok(b));
        p.b_bytes = p.copy_b ? (size_t) nb_elems * sizeof(__half) : 0;
    } else {
        p.path = MM_CUBLAS;
        p.gemm_type = a->type;   // F32, F16 or BF16
        const size_t es = tsr_type_size(a->type);
        p.copy_a = !gemm_operand_ok(a);
        p.a_bytes = p.copy_a ? (size_t) na_elems * es : 0;
        p.copy_b = !(b->type == a->type && gemm_operand_ok(b));
        p.b_bytes = p.copy_b ? (size_t) nb_elems * es : 0;
    }
    p.total = ws_round(p.a_bytes) + ws_round(p.b_bytes);
    return p;
}

// ---- cuBLAS -------------------------------------------------------------------------------------

struct gemm_operand {
    const void * ptr;
    int64_t ld, s2, s3;   // in elements
};

// C[M, N] per batch = A^T . B with A (K x M, lda), B (K x N, ldb), column-major (tessera rows
// are cuBLAS columns). A broadcast over dims 2-3 by the ratios ne12/ne02, ne13/ne03.
bool gemm_batched(op_ctx & c, cudaDataType_t dt, gemm_operand A, gemm_operand B, float * C, int64_t ldc, int64_t sc2, int64_t sc3,
                  int64_t M, int64_t N, int64_t K, int64_t ne02, int64_t ne03, int64_t ne12, int64_t ne13) {
    const float alpha = 1.0f, beta = 0.0f;
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    if (dt == CUDA_R_32F && c.allow_tf32) ct = CUBLAS_COMPUTE_32F_FAST_TF32;
    const size_t es = dt == CUDA_R_32F ? 4 : 2;
    const int64_t r2 = ne12 / ne02, r3 = ne13 / ne03;
    for (int64_t i13 = 0; i13 < ne13; ++i13) {
        const int64_t i03 = i13 / r3;
        if (r2 == 1) {
            const char * pa = (const char *) A.ptr + (size_t) (i03 * A.s3) * es;
            const char * pb = (const char *) B.ptr + (size_t) (i13 * B.s3) * es;
            float * pc = C + i13 * sc3;
            cublasStatus_t st;
            if (ne12 == 1) {
                st = cublasGemmEx(c.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) N, (int) K, &alpha, pa, dt, (int) A.ld,
                                  pb, dt, (int) B.ld, &beta, pc, CUDA_R_32F, (int) ldc, ct, CUBLAS_GEMM_DEFAULT);
            } else {
                st = cublasGemmStridedBatchedEx(c.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) N, (int) K, &alpha,
                                                pa, dt, (int) A.ld, A.s2, pb, dt, (int) B.ld, B.s2, &beta,
                                                pc, CUDA_R_32F, (int) ldc, sc2, (int) ne12, ct, CUBLAS_GEMM_DEFAULT);
            }
            if (st != CUBLAS_STATUS_SUCCESS) return cublas_fail(st, "GemmEx", c.device);
        } else {
            for (int64_t i02 = 0; i02 < ne02; ++i02) {
                const char * pa = (const char *) A.ptr + (size_t) (i02 * A.s2 + i03 * A.s3) * es;
                const char * pb = (const char *) B.ptr + (size_t) (i02 * r2 * B.s2 + i13 * B.s3) * es;
                float * pc = C + i02 * r2 * sc2 + i13 * sc3;
                const cublasStatus_t st = cublasGemmStridedBatchedEx(c.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) M, (int) N, (int) K,
                    &alpha, pa, dt, (int) A.ld, 0, pb, dt, (int) B.ld, B.s2, &beta, pc, CUDA_R_32F, (int) ldc, sc2, (int) r2, ct,
                    CUBLAS_GEMM_DEFAULT);
                if (st != CUBLAS_STATUS_SUCCESS) return cublas_fail(st, "GemmStridedBatchedEx", c.device);
            }
        }
    }
    return true;
}

inline gemm_operand operand_of(const tsr_tensor * t) {
    const size_t es = tsr_type_size(t->type);
    return gemm_operand{t->data, (int64_t) (t->nb[1] / es), (int64_t) (t->nb[2] / es), (int64_t) (t->nb[3] / es)};
}

inline gemm_operand contiguous_operand(const void * p, const int64_t ne[4]) {
    return gemm_operand{p, ne[0], ne[0] * ne[1], ne[0] * ne[1] * ne[2]};
}

// The MM_MMV_DQ path: per batch matrix, every column of src1 against src0's rows.
bool launch_mmv_dq(op_ctx & c, const tsr_tensor * a, const tsr_tensor * b, tsr_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
    const int64_t ldx = (int64_t) (b->nb[1] / sizeof(float)), ldy = (int64_t) (dst->nb[1] / sizeof(float));
    const int rows_per_block = CU_BLOCK / 32;
    const unsigned grid = (unsigned) ((M + rows_per_block - 1) / rows_per_block);
    for (int64_t i13 = 0; i13 < b->ne[3]; ++i13) {
        for (int64_t i12 = 0; i12 < b->ne[2]; ++i12) {
            const char * W = (const char *) a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
            const float * x = (const float *) ((const char *) b->data + i12 * b->nb[2] + i13 * b->nb[3]);
            float * y = (float *) ((char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3]);
            with_dq_type(a->type, [&](auto t) {
                k_mmv_dq<decltype(t)::value><<<grid, CU_BLOCK, 0, c.stream>>>(W, (int64_t) a->nb[1], M, x, ldx, (int) N, K, y, ldy);
            });
        }
    }
    TSR_CU_CHECK(cudaGetLastError(), c.device);
    return true;
}

bool op_mul_mat(op_ctx & c, tsr_tensor * dst) {
    const tsr_tensor * a = dst->src[0], * b = dst->src[1];
    const mm_plan p = plan_mul_mat(dst);
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    if (tsr_nelements(dst) == 0) return true;
    if (K == 0) {
        TSR_CU_CHECK(cudaMemsetAsync(dst->data, 0, tsr_nbytes(dst), c.stream), c.device);
        return true;
    }
    float * y = (float *) dst->data;
    const int64_t ldy = (int64_t) (dst->nb[1] / sizeof(float));

    if (p.path == MM_MMVQ || p.path == MM_MMVQ_GENERIC || p.path == MM_MMV_DQX) {
        int8_t * xq = (int8_t *) c.ws_alloc(p.xq_bytes);
        float2 * xds = (float2 *) c.ws_alloc(p.xds_bytes);
        if (!xq || !xds) return false;
        const int64_t nblk_total = (int64_t) (p.xds_bytes / sizeof(float2));
        k_quantize_x<<<grid_1d(nblk_total * 32), CU_BLOCK, 0, c.stream>>>((const char *) b->data, make_desc(b), xq, xds, nblk_total);
        const int nblk = (int) (K / 32);
        const int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];
        const bool fast = p.path == MM_MMVQ;
        for (int64_t i13 = 0; i13 < b->ne[3]; ++i13) {
            for (int64_t i12 = 0; i12 < b->ne[2]; ++i12) {
                const char * W = (const char *) a->data + (i12 / r2) * a->nb[2] + (i13 / r3) * a->nb[3];
                const int64_t col0 = (i13 * b->ne[2] + i12) * N;
                float * yb = (float *) ((char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3]);
                const int8_t * xqb = xq + col0 * K;
                const float2 * xdb = xds + col0 * nblk;
                if (a->type == TSR_TYPE_Q4_0)
                    launch_mmvq_t<TSR_TYPE_Q4_0>(c, (int) N, fast, W, (int64_t) a->nb[1], nblk, M, xqb, xdb, K, yb, ldy);
                else if (a->type == TSR_TYPE_Q8_0)
                    launch_mmvq_t<TSR_TYPE_Q8_0>(c, (int) N, fast, W, (int64_t) a->nb[1], nblk, M, xqb, xdb, K, yb, ldy);
                else
                    with_dq_type(a->type, [&](auto t) {
                        launch_mmvq_t<decltype(t)::value>(c, (int) N, fast, W, (int64_t) a->nb[1], nblk, M, xqb, xdb, K, yb, ldy);
                    });
            }
        }
        return true;
    }
    if (p.path == MM_MMV_DQ) return launch_mmv_dq(c, a, b, dst);

    // cuBLAS paths
    const tsr_type gt = p.gemm_type;
    gemm_operand A = operand_of(a), B = operand_of(b);
    if (p.copy_a) {
        void * pa = c.ws_alloc(p.a_bytes);
        if (!pa) return false;
        if (tsr_is_quantized(a->type)) {
            const int64_t n = tsr_nelements(a);
            const tdesc da = make_desc(a);
            const char * src = (const char *) a->data;
            __half * h = (__half *) pa;
            if (a->type == TSR_TYPE_Q4_0)
                k_dequant_f16<TSR_TYPE_Q4_0><<<grid_for(n), CU_BLOCK, 0, c.stream>>>(src, da, h, n);
            else if (a->type == TSR_TYPE_Q8_0)
                k_dequant_f16<TSR_TYPE_Q8_0><<<grid_for(n), CU_BLOCK, 0, c.stream>>>(src, da, h, n);
            else
                with_dq_type(a->type, [&](auto t) { k_dequant_f16<decltype(t)::value><<<grid_for(n), CU_BLOCK, 0, c.stream>>>(src, da, h, n); });
        } else if (!launch_cpy(c, a->data, a->type, make_desc(a), pa, gt, make_contig_desc(a->ne, (int64_t) tsr_type_size(gt)))) {
            return false;
        }
        A = contiguous_operand(pa, a->ne);
    }
    if (p.copy_b) {
        void * pb = c.ws_alloc(p.b_bytes);
        if (!pb) return false;
        if (!launch_cpy(c, b->data, b->type, make_desc(b), pb, gt, make_contig_desc(b->ne, (int64_t) tsr_type_size(gt)))) return false;
        B = contiguous_operand(pb, b->ne);
    }
    const cudaDataType_t dt = gt == TSR_TYPE_F32 ? CUDA_R_32F : (gt == TSR_TYPE_BF16 ? CUDA_R_16BF : CUDA_R_16F);
    return gemm_batched(c, dt, A, B, y, ldy,
                        (int64_t) (dst->nb[2] / sizeof(float)), (int64_t) (dst->nb[3] / sizeof(float)),
                        M, N, K, a->ne[2], a->ne[3], b->ne[2], b->ne[3]);
}

} // namespace
} // namespace tsr_cuda
