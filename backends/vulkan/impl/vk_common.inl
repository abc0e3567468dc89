/*
 * vk_common.inl - shared state of the Vulkan backend: includes, the device and buffer
 * records, small helpers. Part of tessera-vulkan.h's implementation (C++17).
 */
#include "tessera/impl/core_internal.h"
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {
namespace tsr_vk {

/* Shader variants, in the order of tsr_vk_shaders[] (checked by name at device init). */
enum shader_id {
    SH_UNARY, SH_BINARY,
    SH_COPY_F32_F32, SH_COPY_F32_F16, SH_COPY_F16_F32, SH_COPY_F16_F16,
    SH_GLU, SH_CONCAT, SH_DIAG_MASK_INF, SH_NORM,
    SH_SOFT_MAX_F32, SH_SOFT_MAX_F16, SH_ROPE,
    SH_GET_ROWS_F32, SH_GET_ROWS_F16, SH_GET_ROWS_Q8_0, SH_GET_ROWS_Q4_0,
    SH_MUL_MAT_F32, SH_MUL_MAT_F16, SH_MUL_MAT_Q8_0, SH_MUL_MAT_Q4_0,
    SH_MUL_MAT_VEC_F32, SH_MUL_MAT_VEC_F16, SH_MUL_MAT_VEC_Q8_0, SH_MUL_MAT_VEC_Q4_0,
    SH_FLASH_ATTN_F32_M32, SH_FLASH_ATTN_F32_M16, SH_FLASH_ATTN_F16_M32, SH_FLASH_ATTN_F16_M16,
    SH_GET_ROWS_Q4_1, SH_GET_ROWS_Q5_0, SH_GET_ROWS_Q5_1, SH_GET_ROWS_IQ4_NL, SH_GET_ROWS_Q2_K, SH_GET_ROWS_Q3_K, SH_GET_ROWS_Q4_K, SH_GET_ROWS_Q5_K, SH_GET_ROWS_Q6_K,
    SH_MUL_MAT_Q4_1, SH_MUL_MAT_Q5_0, SH_MUL_MAT_Q5_1, SH_MUL_MAT_IQ4_NL, SH_MUL_MAT_Q2_K, SH_MUL_MAT_Q3_K, SH_MUL_MAT_Q4_K, SH_MUL_MAT_Q5_K, SH_MUL_MAT_Q6_K,
    SH_MUL_MAT_VEC_Q4_1, SH_MUL_MAT_VEC_Q5_0, SH_MUL_MAT_VEC_Q5_1, SH_MUL_MAT_VEC_IQ4_NL, SH_MUL_MAT_VEC_Q2_K, SH_MUL_MAT_VEC_Q3_K, SH_MUL_MAT_VEC_Q4_K, SH_MUL_MAT_VEC_Q5_K, SH_MUL_MAT_VEC_Q6_K,
    /* issue 17 part A */
    SH_TOP_K, SH_CUMSUM,
    /* issue 17 part B */
    SH_MODELS, SH_MODELS_K16,
    SH_SET_ROWS_F32, SH_SET_ROWS_F16,
    SH_COUNT
};
static const char * const shader_names[SH_COUNT] = {
    "unary", "binary",
    "copy_f32_f32", "copy_f32_f16", "copy_f16_f32", "copy_f16_f16",
    "glu", "concat", "diag_mask_inf", "norm",
    "soft_max_f32", "soft_max_f16", "rope",
    "get_rows_f32", "get_rows_f16", "get_rows_q8_0", "get_rows_q4_0",
    "mul_mat_f32", "mul_mat_f16", "mul_mat_q8_0", "mul_mat_q4_0",
    "mul_mat_vec_f32", "mul_mat_vec_f16", "mul_mat_vec_q8_0", "mul_mat_vec_q4_0",
    "flash_attn_f32_m32", "flash_attn_f32_m16", "flash_attn_f16_m32", "flash_attn_f16_m16",
    "get_rows_q4_1", "get_rows_q5_0", "get_rows_q5_1", "get_rows_iq4_nl", "get_rows_q2_k", "get_rows_q3_k", "get_rows_q4_k", "get_rows_q5_k", "get_rows_q6_k",
    "mul_mat_q4_1", "mul_mat_q5_0", "mul_mat_q5_1", "mul_mat_iq4_nl", "mul_mat_q2_k", "mul_mat_q3_k", "mul_mat_q4_k", "mul_mat_q5_k", "mul_mat_q6_k",
    "mul_mat_vec_q4_1", "mul_mat_vec_q5_0", "mul_mat_vec_q5_1", "mul_mat_vec_iq4_nl", "mul_mat_vec_q2_k", "mul_mat_vec_q3_k", "mul_mat_vec_q4_k", "mul_mat_vec_q5_k", "mul_mat_vec_q6_k",
    /* issue 17 part A */
    "top_k", "cumsum",
    /* issue 17 part B */
    "models", "models_k16",
    "set_rows_f32", "set_rows_f16",
};
static const int MAX_SPEC = 64;          /* specialization values per shader (unary: 30 functions x flat) */
static const uint32_t N_BINDINGS = 5;    /* src0, src1, src2, dst, src3 */
static const uint32_t PC_SIZE = 128;     /* push-constant bytes every pipeline layout declares */

/* Fake base address of every Vulkan buffer: tensor->data - base = byte offset. */
static char * const FAKE_BASE = reinterpret_cast<char *>(static_cast<uintptr_t>(0x1000));

struct device;

/* A large VkDeviceMemory block that small buffers are sub-allocated from. */
struct mem_block {
    VkDeviceMemory mem = VK_NULL_HANDLE;
    size_t size = 0;
    uint32_t type = 0;
    void * map = nullptr;                           /* persistent mapping (mapped blocks only) */
    std::vector<std::pair<size_t, size_t>> free;    /* (offset, size) sorted by offset */
    int n_regions = 0;
};

/* A host-visible buffer for uploads and downloads. */
struct staging {
    VkBuffer buf = VK_NULL_HANDLE;
    VkDeviceMemory mem = VK_NULL_HANDLE;
    void * map = nullptr;
    size_t size = 0;
    bool coherent = true;
};

struct device {
    int index = -1;
    VkPhysicalDevice phys = VK_NULL_HANDLE;
    VkDevice dev = VK_NULL_HANDLE;
    VkQueue queue = VK_NULL_HANDLE;
    uint32_t qfam = 0;
    VkPhysicalDeviceProperties props{};
    VkPhysicalDeviceMemoryProperties memprops{};
    size_t align = 16;          /* minStorageBufferOffsetAlignment (>= 16) */
    size_t max_range = 0;       /* maxStorageBufferRange */
    size_t max_alloc = 0;       /* min(maxMemoryAllocationSize, maxBufferSize) */
    bool unified = false;       /* device-local memory is host-visible and coherent (CPU/iGPU) */
    /* VK_EXT_external_memory_host: buffers over caller memory (0 alignment: not available) */
    size_t host_import_align = 0;
    PFN_vkGetMemoryHostPointerPropertiesEXT get_host_pointer_props = nullptr;
    std::string name;           /* "Vulkan0" */
    std::string desc;

    VkDescriptorSetLayout dsl = VK_NULL_HANDLE;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    VkShaderModule modules[SH_COUNT] = {};
    VkPipeline pipes[SH_COUNT][MAX_SPEC] = {};
    int n_pipelines = 0;

    /* transfers: one command buffer + fence, a staging buffer, all under `mutex` */
    std::recursive_mutex mutex;
    VkCommandPool xfer_pool = VK_NULL_HANDLE;
    VkCommandBuffer xfer_cb = VK_NULL_HANDLE;
    VkFence xfer_fence = VK_NULL_HANDLE;
    staging stage;
    /* a small buffer bound to unused binding slots */
    VkBuffer dummy = VK_NULL_HANDLE;
    VkDeviceMemory dummy_mem = VK_NULL_HANDLE;

    tsr_backend_buffer_type buft{};

    /* sub-allocation: buffers up to block_size/4 share blocks of block_size bytes */
    std::vector<mem_block *> blocks;
    size_t block_size = 0;
    size_t n_dedicated = 0, dedicated_bytes = 0;
};

/* A Vulkan buffer: one VkBuffer over one VkDeviceMemory block. */
struct buffer_ctx {
    device * dev = nullptr;
    VkBuffer buf = VK_NULL_HANDLE;
    VkDeviceMemory mem = VK_NULL_HANDLE;   /* dedicated memory, or NULL when in a block */
    mem_block * block = nullptr;           /* the block it is sub-allocated from */
    size_t mem_off = 0, mem_size = 0;      /* its region of the block */
    void * map = nullptr;       /* persistent mapping on the unified path, else NULL */
    size_t size = 0;            /* bytes allocated (>= requested) */
};

static const char * vk_result_str(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default: return "VkResult(other)";
    }
}

static size_t align_down(size_t x, size_t a) { return x / a * a; }
static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Byte offset of a placed tensor inside its Vulkan buffer. */
static size_t tensor_offset(const tsr_tensor * t) {
    return static_cast<size_t>(static_cast<const char *>(t->data) - FAKE_BASE);
}

static buffer_ctx * tensor_buf(const tsr_tensor * t) {
    tsr_backend_buffer_t b = t->view_src ? t->view_src->buffer : t->buffer;
    if (!b) b = t->buffer;
    return b ? static_cast<buffer_ctx *>(b->context) : nullptr;
}

} // namespace tsr_vk
} // namespace
