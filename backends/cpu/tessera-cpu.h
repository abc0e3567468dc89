/*
 * tessera-cpu.h - the CPU backend: computes graphs on host memory with a persistent
 * thread pool, SIMD kernels chosen at run time (scalar, AVX2+FMA, AVX-512, NEON) and
 * one reused workspace for per-op scratch.
 *
 * Header-only like the core: TSR_IMPLEMENTATION, in one C++17 file, compiles the core
 * and every backend header included in that file, in any include order (see
 * tessera/tessera.h and README "Using tessera").
 *
 * Environment: TSR_CPU_ISA=scalar|avx2|avx512|amx|neon forces a kernel path (a path the
 * CPU lacks is ignored with a message on stderr).
 */
#ifndef TESSERA_CPU_H
#define TESSERA_CPU_H

#include "tessera/tessera.h"
#include "tessera/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Kernel paths. The best the CPU supports is used unless forced. */
enum tsr_cpu_isa {
    TSR_CPU_ISA_SCALAR = 0,  /* portable C++: the reference every other path is tested against */
    TSR_CPU_ISA_AVX2   = 1,  /* x86-64 AVX2 + FMA + F16C (+ AVX-VNNI where present) */
    TSR_CPU_ISA_AVX512 = 2,  /* x86-64 AVX-512 F/BW/VL/DQ (+ BF16 and VNNI where present) */
    TSR_CPU_ISA_NEON   = 3,  /* aarch64 Advanced SIMD */
    TSR_CPU_ISA_AMX    = 4   /* the AVX-512 path with the quantized GEMMs (prompt-sized mul_mat
                              * of Q8_0, Q4_0, the K-quants, ...) on AMX int8 tiles: x86-64 with
                              * AMX-INT8 (Sapphire Rapids and later) on Linux. Choosing it asks
                              * the kernel for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), a
                              * process-wide grant that enlarges signal frames by 8 KiB; set
                              * TSR_CPU_ISA=avx512 to keep a process from asking. */
};

/* A new CPU backend (threads: hardware concurrency, at most 64). NULL + error on failure. */
TSR_API tsr_backend_t tsr_backend_cpu_init(void);
/* The CPU backend's kind in the registry (backend.h): one device, "CPU", of type CPU,
 * whose init_backend takes "n_threads=N". */
TSR_API tsr_backend_reg_t tsr_backend_cpu_reg(void);
/* true when backend was made by tsr_backend_cpu_init. */
TSR_API bool tsr_backend_is_cpu(tsr_backend_t backend);
/* Threads used by graph_compute (the caller's thread counts as one); n < 1 is 1.
 * The pool is rebuilt here, never while a graph runs. */
TSR_API void tsr_backend_cpu_set_n_threads(tsr_backend_t backend, int n_threads);
TSR_API int  tsr_backend_cpu_get_n_threads(tsr_backend_t backend);
/* Called between nodes; returning true stops the graph (TSR_STATUS_ABORTED). NULL removes it. */
TSR_API void tsr_backend_cpu_set_abort_callback(tsr_backend_t backend, bool (*abort_callback)(void * data), void * data);
/* Where the workspace memory comes from (copied; alloc->user must outlive the backend).
 * NULL: the process default (tsr_get_host_allocator() at the time of the call). The
 * current workspace is freed and regrown on the next reserve/compute. */
TSR_API void tsr_backend_cpu_set_host_allocator(tsr_backend_t backend, const struct tsr_host_allocator * alloc);

/* CPU_REPACK: host buffers that store Q4_0, IQ4_NL, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q3_K and Q2_K
 * weight matrices (2D, contiguous, rows a multiple of 8; x86 builds, not yet aarch64; Q5_0,
 * Q3_K and Q2_K on CPUs with AVX2, Q4_1 / Q5_1 / Q5_K on CPUs with AVX2 but not AVX-512), when
 * set with tsr_backend_tensor_set, in a layout interleaving 8 rows, in place of the file's
 * bytes (no extra memory): the GEMM and the matrix-vector kernels stream it without
 * shuffles. Q2_K on CPUs with AVX-512 VNNI, Q3_K on those with AVX-512 VNNI, GFNI and VBMI
 * (while the AVX-512 path is in use: set under TSR_CPU_ISA=avx2 they take that path's layouts):
 * the file's rows (any number, any contiguous shape: a MoE file's 3D experts too) with each
 * super-block's levels (and Q3_K's scales) regrouped by sub-block, which their
 * matrix-vector kernels sum whole. tsr_backend_tensor_get returns the file's bytes; only
 * mul_mat (as src0), mul_mat_id (src0, word layouts) and get_rows read a repacked matrix on
 * the CPU backend. Other tensors
 * keep their bytes. Write such weights only through tsr_backend_tensor_set (or
 * tsr_backend_tensor_copy). */
TSR_API tsr_backend_buffer_type_t tsr_backend_cpu_repack_buffer_type(void);
/* true when a CPU_REPACK buffer stores t (placed or not) interleaved: the buffer pays only
 * for such tensors, so a loader may keep the others elsewhere (e.g. mapped). */
TSR_API bool tsr_backend_cpu_repacks(const struct tsr_tensor * t);

/* ISA query and control (process-wide). */
TSR_API const char *     tsr_cpu_isa_name(enum tsr_cpu_isa isa);             /* "scalar", "avx2", ... */
TSR_API bool             tsr_cpu_isa_supported(enum tsr_cpu_isa isa);        /* this CPU (and build) can run it */
TSR_API enum tsr_cpu_isa tsr_cpu_isa_best(void);                             /* best supported */
TSR_API enum tsr_cpu_isa tsr_cpu_get_isa(void);                              /* in use now */
/* Force a path for every CPU backend (tests, benchmarks). false + error when the CPU
 * lacks it (nothing changes). Do not call while a graph runs. */
TSR_API bool             tsr_cpu_set_isa(enum tsr_cpu_isa isa);
/* Tuning hook (cpu_bench --prefetch): how far ahead, in bytes, the x86 mat-vec kernels
 * prefetch the rows of one weight type (repacked: in a CPU_REPACK buffer); 0: no prefetch
 * in effect. The defaults were measured; results never depend on it. Process-wide; not
 * while a graph runs. false + error for a type without a setting (F32, Q8_K, ...) or more
 * than 1 MiB. Q2_K's and Q3_K's repacked settings are their 8-row records' (AVX2 CPUs);
 * where their word layouts are in use (AVX-512), which stream as the file layouts, the
 * repacked setting is the file setting. */
TSR_API bool             tsr_cpu_set_matvec_prefetch(enum tsr_type type, bool repacked, size_t ahead);
TSR_API bool             tsr_cpu_get_matvec_prefetch(enum tsr_type type, bool repacked, size_t * ahead);
/* Optional x86 extensions used inside the AVX-512 path. */
TSR_API bool             tsr_cpu_has_avx512_bf16(void);
TSR_API bool             tsr_cpu_has_avx512_vnni(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#define TSR_CPU_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_CPU_H */

/* ---- implementation (outside the include guard: see tessera/tessera.h) -------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_CPU_IMPLEMENTED)
#define TSR_CPU_IMPLEMENTED
#ifndef __cplusplus
#error "TSR_IMPLEMENTATION must be defined in a C++17 translation unit"
#endif
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/backend_impl.h"
#include "impl/cpu_internal.inl"
#include "impl/threadpool.inl"
#include "impl/workspace.inl"
#include "impl/isa.inl"
#include "impl/quant.inl"
#include "impl/pack.inl"
#include "impl/gemm_kquant.inl"
#include "impl/pack_x86.inl"
#include "impl/kernels_avx2.inl"
#include "impl/kernels_avx512.inl"
#include "impl/kernels_amx.inl"
#include "impl/kernels_neon.inl"
#include "impl/repack_words.inl"
#include "impl/repack_r8.inl"
#include "impl/gemm.inl"
#include "impl/repack.inl"
#include "impl/ops_elementwise.inl"
#include "impl/ops_rows.inl"
#include "impl/ops_conv.inl"
#include "impl/ops_attn.inl"
#include "impl/ops_models.inl"
#include "impl/ops_shape.inl"
#include "impl/ops_custom.inl"
#include "impl/backend_cpu.inl"
#include "impl/device_cpu.inl"
#include "tessera/impl/implement_included.h"
#endif
