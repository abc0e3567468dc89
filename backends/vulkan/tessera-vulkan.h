/*
 * tessera-vulkan.h - the Vulkan backend: devices, device memory, SPIR-V compute shaders.
 *
 * Header-only like the rest of tessera: TSR_IMPLEMENTATION, in one C++17 file, compiles
 * the core and every backend header included in that file, in any include order (see
 * tessera/tessera.h); including this header there compiles the Vulkan backend (the old
 * TSR_VULKAN_IMPLEMENTATION is no longer needed). Link that program with the Vulkan loader (CMake: tessera::vulkan; Meson:
 * tessera_vulkan_dep). The shaders are embedded (tessera-vulkan-shaders.h), so no
 * shader compiler is needed at build time.
 *
 * Devices are the loader's physical devices in its order, CPU implementations (Mesa's
 * lavapipe) included. Index -1 means "the default device": the one named by the
 * environment variable TSR_VULKAN_DEVICE=<index> when set, else the first discrete GPU,
 * else the first integrated GPU, else device 0.
 *
 * Environment: TSR_VULKAN_DEVICE (see above); TSR_VULKAN_NO_UNIFIED=1 disables the
 * host-visible (unified memory) path, so every transfer goes through staging buffers.
 */
#ifndef TESSERA_VULKAN_H
#define TESSERA_VULKAN_H

#include "tessera/tessera.h"
#include "tessera/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_VK_MAX_DEVICES 16

/* Number of Vulkan devices (0 when there is no loader, no driver or no device; the
 * reason is then in tsr_last_error()). */
TSR_API int  tsr_backend_vk_get_device_count(void);
/* "llvmpipe (LLVM 15.0.6, 256 bits) [cpu]" into desc (truncated to size). false + error
 * for a bad index. */
TSR_API bool tsr_backend_vk_get_device_description(int device, char * desc, size_t size);
/* Device-local memory of a device: total bytes of its largest device-local heap, and a
 * budget estimate of what is free (= total where VK_EXT_memory_budget is absent). */
TSR_API bool tsr_backend_vk_get_device_memory(int device, size_t * free_bytes, size_t * total_bytes);
/* The default device's index (see above), or -1 when there is none. */
TSR_API int  tsr_backend_vk_default_device(void);

/* A backend on device `device` (-1: the default device). NULL + a clear error when there
 * is no Vulkan device, the index is out of range, or the device lacks what the shaders
 * need (16- and 8-bit storage buffer access). */
TSR_API tsr_backend_t tsr_backend_vk_init(int device);
/* The Vulkan backend's kind in the registry (backend.h): devices "Vulkan<index>", the
 * default device listed first; a CPU implementation (lavapipe) has the device type CPU. */
TSR_API tsr_backend_reg_t tsr_backend_vk_reg(void);
TSR_API bool          tsr_backend_is_vk(tsr_backend_t backend);
/* The device-local buffer type of a device (-1: default); NULL + error when absent.
 * Owned by tessera; valid until exit. */
TSR_API tsr_backend_buffer_type_t tsr_backend_vk_buffer_type(int device);
/* true when buft is a Vulkan buffer type. */
TSR_API bool tsr_backend_buft_is_vk(tsr_backend_buffer_type_t buft);

/* Device memory of a device (-1: default): buffers up to block_size/4 bytes are
 * sub-allocated from shared blocks of block_size bytes (at minStorageBufferOffsetAlignment),
 * larger ones get their own allocation. */
struct tsr_vk_memory_stats {
    size_t block_size;        /* bytes per shared block */
    size_t n_blocks;          /* shared blocks allocated now */
    size_t block_bytes;       /* their bytes */
    size_t block_free_bytes;  /* bytes of them not handed out */
    size_t n_regions;         /* buffers living in shared blocks */
    size_t n_dedicated;       /* buffers with their own allocation */
    size_t dedicated_bytes;
    size_t staging_bytes;     /* host-visible staging buffer */
    size_t max_range;         /* maxStorageBufferRange: ops on larger operands run in row windows */
    size_t max_alloc;         /* maxMemoryAllocationSize: the largest one buffer can be */
};
TSR_API bool tsr_backend_vk_get_memory_stats(int device, struct tsr_vk_memory_stats * stats);

/* Statistics of the last graph_compute on a Vulkan backend (for tests and benchmarks). */
struct tsr_vk_graph_stats {
    int n_nodes;        /* nodes of the graph */
    int n_dispatches;   /* compute dispatches recorded */
    int n_barriers;     /* pipeline barriers recorded (only between dependent dispatches) */
    int n_submits;      /* queue submissions (1 per graph) */
    int n_pipelines;    /* pipelines cached on the device so far */
};
TSR_API struct tsr_vk_graph_stats tsr_backend_vk_get_graph_stats(tsr_backend_t backend);

#ifdef __cplusplus
} /* extern "C" */
#endif

#define TSR_VULKAN_DECLARED  /* every declaration above is in: the implementation may follow */
#endif /* TESSERA_VULKAN_H */

/* ---- implementation (outside the include guard: see tessera/tessera.h) -------------- */
#if defined(TSR_IMPLEMENTATION) && !defined(TSR_VULKAN_IMPLEMENTED)
#define TSR_VULKAN_IMPLEMENTED
#ifndef __cplusplus
#error "TSR_IMPLEMENTATION must be defined in a C++17 translation unit"
#endif
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/backend_impl.h"
#include "tessera-vulkan-shaders.h"
#include "impl/vk_common.inl"
#include "impl/vk_device.inl"
#include "impl/vk_memory.inl"
#include "impl/vk_pipeline.inl"
#include "impl/vk_ops.inl"
#include "impl/vk_graph.inl"
#include "impl/vk_registry.inl"
#include "tessera/impl/implement_included.h"
#endif
