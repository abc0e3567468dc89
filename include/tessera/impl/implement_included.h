/*
 * implement_included.h - the end of every part's implementation block: compiles each part
 * whose header this translation unit included before it defined TSR_IMPLEMENTATION.
 *
 * A part's declarations sit under its include guard and its implementation block outside
 * it, so including a header again after the macro compiles that part. This file does it
 * for the parts the user included only before the macro, so the rule holds in any order:
 * TSR_IMPLEMENTATION compiles the core and every backend header included in the TU.
 * A part counts as included once its header's declarations are complete (TSR_<PART>_DECLARED,
 * defined at the end of them): a header that is still being read further up the include
 * stack is implemented by its own block when it ends. No include guard on purpose: each
 * inclusion looks again.
 */
#ifdef TSR_IMPLEMENTATION

#if defined(TSR_CORE_DECLARED) && !defined(TSR_CORE_IMPLEMENTED)
#include "../tessera.h"
#endif
#if defined(TSR_BACKEND_DECLARED) && !defined(TSR_BACKEND_IMPLEMENTED)
#include "../backend.h"
#endif
#if defined(TSR_ALLOC_DECLARED) && !defined(TSR_ALLOC_IMPLEMENTED)
#include "../alloc.h"
#endif
#if defined(TSR_GGUF_DECLARED) && !defined(TSR_GGUF_IMPLEMENTED)
#include "../gguf.h"
#endif
#if defined(TSR_SCHED_DECLARED) && !defined(TSR_SCHED_IMPLEMENTED)
#include "../sched.h"
#endif

/* Backend headers live beside their implementation files: backends/<name>/ in the source
 * tree, include/tessera/<name>/ once installed, and on the include path in both. This
 * copy's own file comes first, so a second vendored copy on the include path is not taken. */
#if defined(TSR_CPU_DECLARED) && !defined(TSR_CPU_IMPLEMENTED)
#if __has_include("../../../backends/cpu/tessera-cpu.h")
#include "../../../backends/cpu/tessera-cpu.h"
#elif __has_include("../cpu/tessera-cpu.h")
#include "../cpu/tessera-cpu.h"
#elif __has_include("tessera-cpu.h")
#include "tessera-cpu.h"
#else
#error "tessera-cpu.h was included before TSR_IMPLEMENTATION and cannot be found again: include it after the macro"
#endif
#endif

#if defined(TSR_VULKAN_DECLARED) && !defined(TSR_VULKAN_IMPLEMENTED)
#if __has_include("../../../backends/vulkan/tessera-vulkan.h")
#include "../../../backends/vulkan/tessera-vulkan.h"
#elif __has_include("../vulkan/tessera-vulkan.h")
#include "../vulkan/tessera-vulkan.h"
#elif __has_include("tessera-vulkan.h")
#include "tessera-vulkan.h"
#else
#error "tessera-vulkan.h was included before TSR_IMPLEMENTATION and cannot be found again: include it after the macro"
#endif
#endif

#if defined(TSR_CUDA_DECLARED) && !defined(TSR_CUDA_IMPLEMENTED) && defined(__CUDACC__)
#if __has_include("../../../backends/cuda/tessera-cuda.h")
#include "../../../backends/cuda/tessera-cuda.h"
#elif __has_include("../cuda/tessera-cuda.h")
#include "../cuda/tessera-cuda.h"
#elif __has_include("tessera-cuda.h")
#include "tessera-cuda.h"
#else
#error "tessera-cuda.h was included before TSR_IMPLEMENTATION and cannot be found again: include it after the macro"
#endif
#endif

#endif /* TSR_IMPLEMENTATION */
