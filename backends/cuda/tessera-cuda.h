/*
 * tessera-cuda.h - the CUDA backend: device buffers, pinned host buffers, a scratch pool,
 * kernels for the transformer op set and cuBLAS for F32/F16 matrix products.
 *
 * Packaging (read this first). tessera's rule is the same for every part:
 * TSR_IMPLEMENTATION, in one translation unit, compiles the core and every backend header
 * included there, in any include order (see tessera/tessera.h). The CUDA kernels need
 * nvcc, so the CUDA part follows it only in a TU that nvcc compiles:
 *
 *   1. Usual set-up: one ordinary C++17 TU (g++/clang++) defines TSR_IMPLEMENTATION and
 *      includes the headers (this one too, if it likes: the CUDA part is skipped there);
 *      one .cu TU defines TSR_CUDA_IMPLEMENTATION, which compiles the CUDA part alone.
 *      backends/cuda/tessera-cuda.cu is exactly that file, and CMake's tessera::cuda /
 *      meson's tessera_cuda_dep build it as a static library that links cudart and cuBLAS.
 *      The two TUs call each other through the public tsr_ API (external linkage), so
 *      TSR_STATIC cannot be used across them.
 *   2. Everything in one nvcc TU (TSR_STATIC users): define TSR_IMPLEMENTATION (and
 *      TSR_STATIC) in a .cu file and include the headers, this one included:
 *
 *     // engine.cu, compiled by nvcc
 *     #define TSR_STATIC
 *     #define TSR_IMPLEMENTATION
 *     #include "tessera/tessera.h"
 *     #include "tessera/backend.h"
 *     #include "tessera/alloc.h"
 *     #include "tessera-cuda.h"
 *
 * Every other file includes this header without the macro; it is C99-includable.
 *
 * Behaviour:
 *   - No driver, no device, out of memory: the calls below return NULL/false/0 with the
 *     CUDA error string in tsr_last_error(); nothing aborts.
 *   - Buffers: cudaMalloc, 256-byte alignment. tensor_set/get through the buffer are
 *     synchronous; tsr_backend_tensor_set_async/get_async queue on the backend's stream
 *     (use pinned host memory, tsr_backend_cuda_host_buffer_type(), for real overlap).
 *   - graph_compute runs every node on the backend's stream and waits for it before
 *     returning. Per-op temporaries (F16 copies of activations, quantized activations,
 *     dequantized weights, contiguous copies) come from a workspace taken from a
 *     best-fit pool of device blocks, sized by graph_reserve or, without it, at the start
 *     of graph_compute before any node runs: no cudaMalloc happens while nodes run.
 *   - mul_mat: F32 x F32 through cuBLAS in full F32 by default. With
 *     tsr_backend_cuda_set_allow_tf32(b, true) the product may use TF32 tensor cores:
 *     inputs rounded to 10 mantissa bits, so expect a relative error per product of
 *     about 2^-11 and, for random data, a normalized mean squared error of the result
 *     around 1e-7 (tests accept <= 1e-4). F16 (BF16) weights: cuBLAS on tensor cores,
 *     F16 (BF16) inputs with F32 accumulation (src1 of another type is converted in the
 *     workspace, so F32 activations are rounded to F16 (BF16) first; src1 of the weight
 *     type is used directly). Q8_0 / Q4_0 weights: for N <= 8 columns an own
 *     matrix-vector kernel that dequantizes in registers (activations quantized to 8 bits
 *     per 32-block, like ggml's q8_1, then integer dot products); for more columns the
 *     weights are dequantized to F16 in the workspace and cuBLAS runs. Q4_1, Q5_0, Q5_1,
 *     IQ4_NL, Q2_K..Q6_K weights: for N <= 8 F32 columns the same 8-bit activations and
 *     integer dot products (cuda_dqdot.cuh: a lane decodes 32 weights of a block or
 *     super-block); for more columns the F16 cuBLAS path.
 *   - flash_attn_ext: F32 q, F32/F16 K and V, F32/F16 mask, ALiBi, softcap, grouped heads
 *     (cuda_attn.cuh: a block per query row and head, online softmax, no score matrix).
 *   - Optional CUDA graph capture (off by default; the registry's params
 *     "graph_capture=1"): a graph computed with the same nodes, shapes and data addresses
 *     as the compute before it is captured, and replayed while it stays the same (a
 *     graph's first compute is launched as it is: capturing one that never comes again
 *     costs more than launching it).
 *   - Ops (supports_op answers false for the rest, e.g. conv_2d, im2col,
 *     pool_2d, upscale, pad, argsort, group_norm, out_prod): add/sub/mul/div with
 *     broadcasting, the unary ops, sqr/sqrt/log, scale, clamp, swiglu (fused and split),
 *     norm, rms_norm, soft_max_ext (F32/F16 mask, ALiBi), rope (normal, NeoX, YaRN,
 *     frequency factors), get_rows (float and every quantized weight type), set_rows, dup/cont/cpy among
 *     F32/F16/BF16, concat, repeat, diag_mask_inf, sum/sum_rows/mean/argmax, mul_mat,
 *     and the view ops. Elementwise and row ops take F32 and F16 (not BF16).
 */
#ifndef TESSERA_CUDA_H
#define TESSERA_CUDA_H

#include "tessera/tessera.h"
#include "tessera/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_CUDA_MAX_DEVICES 16

/* Number of CUDA devices; 0 when there is no driver or no device (never fails). */
TSR_API int  tsr_backend_cuda_get_device_count(void);

/* "NVIDIA H200 (sm_90, 132 SMs, 143 GiB)" into desc (size bytes, NUL-terminated).
 * false + error when the device does not exist or the driver is missing. */
TSR_API bool tsr_backend_cuda_get_device_description(int device, char * desc, size_t size);

/* Free and total device memory in bytes. false + error when unavailable. */
TSR_API bool tsr_backend_cuda_get_device_memory(int device, size_t * free_bytes, size_t * total_bytes);

/* A backend on one device, with its own stream and cuBLAS handle. NULL + the CUDA error
 * string in tsr_last_error() when there is no driver, no such device or no memory. */
TSR_API tsr_backend_t tsr_backend_cuda_init(int device);

/* The CUDA backend's kind in the registry (backend.h): devices "CUDA<index>", type GPU,
 * with the pinned host buffer type as their host buffer type. */
TSR_API tsr_backend_reg_t tsr_backend_cuda_reg(void);

/* Whether a backend is a CUDA backend (false for NULL). */
TSR_API bool tsr_backend_is_cuda(tsr_backend_t backend);

/* The device's buffer type (cudaMalloc, 256-byte alignment), named "CUDA<device>".
 * Returned for any device in [0, TSR_CUDA_MAX_DEVICES) even when no such device exists
 * (so its metadata can be read); allocating from it then fails with the CUDA error.
 * NULL + error outside that range. */
TSR_API tsr_backend_buffer_type_t tsr_backend_cuda_buffer_type(int device);

/* Pinned (page-locked) host memory, "CUDA_Host": is_host, usable by the CPU backend and
 * the fast path for async copies. Allocation fails with the CUDA error without a driver. */
TSR_API tsr_backend_buffer_type_t tsr_backend_cuda_host_buffer_type(void);

/* Whether a buffer type is one of the above (device or pinned host). */
TSR_API bool tsr_backend_buft_is_cuda(tsr_backend_buffer_type_t buft);

/* Options of one backend. Both return false + error when backend is not CUDA. */
TSR_API bool tsr_backend_cuda_set_allow_tf32(tsr_backend_t backend, bool allow);     /* default false */
TSR_API bool tsr_backend_cuda_set_graph_capture(tsr_backend_t backend, bool enable); /* default false */

/* The backend's device index and its cudaStream_t (as void *), or -1 / NULL. */
TSR_API int    tsr_backend_cuda_get_device(tsr_backend_t backend);
TSR_API void * tsr_backend_cuda_get_stream(tsr_backend_t backend);

/* Counters of one backend, for tests and diagnostics. */
struct tsr_cuda_stats {
    size_t pool_cached_bytes;    /* device bytes held by the scratch pool (free or in use) */
    size_t pool_hits;            /* pool requests served from a cached block */
    size_t pool_misses;          /* pool requests that needed cudaMalloc */
    size_t workspace_size;       /* bytes of the per-op workspace */
    size_t graph_captures;       /* CUDA graphs captured (capture on) */
    size_t graph_replays;        /* computes that replayed a captured graph */
    size_t nodes_computed;       /* nodes launched (not replayed) since init */
};
TSR_API bool tsr_backend_cuda_get_stats(tsr_backend_t backend, struct tsr_cuda_stats * stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#define TSR_CUDA_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_CUDA_H */

/* ---- implementation (outside the include guard: see tessera/tessera.h) -------------- */
/* The kernels need nvcc: TSR_IMPLEMENTATION compiles this part only in a TU compiled by
 * nvcc (with the core and every other part included there). A C++ TU that defines
 * TSR_IMPLEMENTATION leaves it to one .cu TU that defines TSR_CUDA_IMPLEMENTATION, which
 * compiles this part alone: tessera-cuda.cu, built by tessera::cuda / tessera_cuda_dep. */
#if (defined(TSR_CUDA_IMPLEMENTATION) || (defined(TSR_IMPLEMENTATION) && defined(__CUDACC__))) && !defined(TSR_CUDA_IMPLEMENTED)
#define TSR_CUDA_IMPLEMENTED
#ifndef __CUDACC__
#error "TSR_CUDA_IMPLEMENTATION must be defined in a .cu translation unit compiled by nvcc"
#endif
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/backend_impl.h"
#include "impl/cuda_common.cuh"
#include "impl/cuda_pool.cuh"
#include "impl/cuda_buffers.cuh"
#include "impl/cuda_elementwise.cuh"
#include "impl/cuda_dequant.cuh"
#include "impl/cuda_dqdot.cuh"
#include "impl/cuda_rows.cuh"
#include "impl/cuda_rope.cuh"
#include "impl/cuda_mulmat.cuh"
#include "impl/cuda_attn.cuh"
#include "impl/cuda_models.cuh"
#include "impl/cuda_backend.cuh"
#include "impl/cuda_registry.cuh"
#ifdef TSR_IMPLEMENTATION
#include "tessera/impl/implement_included.h"
#endif
#endif
