// tessera CUDA backend: the backend object (stream, cuBLAS, workspace, graph compute,
// optional CUDA graph capture) and its public API.
#pragma once

namespace tsr_cuda {
namespace {

constexpr size_t CUBLAS_WS_BYTES = 32u << 20;   // what cuBLAS recommends on Hopper

struct backend_ctx {
    int            device = 0;
    char           name[16] = {0};
    cudaStream_t   stream = nullptr;
    cublasHandle_t cublas = nullptr;
    device_pool *  pool = nullptr;
    void *         ws = nullptr;
    size_t         ws_size = 0;
    void *         cublas_ws = nullptr;
    bool           allow_tf32 = false;
    bool           capture = false;
    // CUDA graph capture state: the key of the captured graph and its executable
    std::vector<int64_t> graph_key;
    std::vector<int64_t> key_scratch;  // the key of the graph being run; keeps its capacity,
                                       // so steady-state replays allocate nothing
    std::vector<int64_t> last_key;     // the key of the last graph launched uncaptured
    cudaGraphExec_t      graph_exec = nullptr;
    tsr_cuda_stats       stats = {};
};

inline backend_ctx * ctx_of(tsr_backend_t b) { return (backend_ctx *) b->context; }

// ---- which ops run here --------------------------------------------------------------

inline bool is_view_op(tsr_op op) {
    return op == TSR_OP_NONE || op == TSR_OP_VIEW || op == TSR_OP_RESHAPE || op == TSR_OP_PERMUTE || op == TSR_OP_TRANSPOSE;
}

inline bool rows_contiguous_f32(const tsr_tensor * t) { return t->type == TSR_TYPE_F32 && t->nb[0] == sizeof(float); }

bool supports(const tsr_tensor * op) {
    const tsr_tensor * s0 = op->src[0], * s1 = op->src[1];
    switch (op->op) {
        case TSR_OP_NONE: case TSR_OP_VIEW: case TSR_OP_RESHAPE: case TSR_OP_PERMUTE: case TSR_OP_TRANSPOSE:
            return true;
        case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV:
            return s0 && s1 && type_is_float(s0->type) && type_is_float(s1->type) && op->type == s0->type &&
                   tsr_can_repeat(s1, s0);
        case TSR_OP_UNARY:
            return s0 && type_is_float(s0->type) && op->type == s0->type && unary_code(tsr_get_unary_op(op)) >= 0;
        case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP:
        case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU:   /* issue 17 part A */
            return s0 && type_is_float(s0->type) && op->type == s0->type;
        case TSR_OP_GLU:
            return s0 && tsr_get_op_params_i32(op, 0) >= 0 && tsr_get_op_params_i32(op, 0) < TSR_GLU_OP_COUNT &&
                   type_is_float(s0->type) && op->type == s0->type && (!s1 || s1->type == s0->type);
        case TSR_OP_NORM: case TSR_OP_RMS_NORM:
        case TSR_OP_L2_NORM:   /* issue 17 part A */
            return s0 && rows_contiguous_f32(s0) && rows_contiguous_f32(op);
        case TSR_OP_TOP_K:     /* issue 17 part A */
            return s0 && s0->type == TSR_TYPE_F32 && op->type == TSR_TYPE_I32 && s0->ne[0] <= INT32_MAX;
        case TSR_OP_SOFT_MAX:
            return s0 && rows_contiguous_f32(s0) && rows_contiguous_f32(op) &&
                   (!s1 || (s1->type == TSR_TYPE_F32 && s1->nb[0] == 4) || (s1->type == TSR_TYPE_F16 && s1->nb[0] == 2)) &&
                   (!s1 || s1->ne[0] == s0->ne[0]);
        case TSR_OP_ROPE:   /* NORMAL, NEOX and rope_multi's modes (issue 17 part B) */
            return s0 && type_is_float(s0->type) && op->type == s0->type && s1 && s1->type == TSR_TYPE_I32 &&
                   (!op->src[2] || op->src[2]->type == TSR_TYPE_F32) && rope_mode_supported(tsr_get_op_params_i32(op, 2));
        case TSR_OP_GET_ROWS:
            return s0 && s1 && s1->type == TSR_TYPE_I32 && op->type == TSR_TYPE_F32 && op->nb[0] == 4 &&
                   (type_is_float_or_bf16(s0->type) || s0->type == TSR_TYPE_Q8_0 || s0->type == TSR_TYPE_Q4_0 || is_dq_type(s0->type)) &&
                   s0->nb[0] == tsr_type_size(s0->type);
        case TSR_OP_SET_ROWS:
            return s0 && s1 && s0->type == TSR_TYPE_F32 && s0->nb[0] == 4 && s1->type == TSR_TYPE_I32 && type_is_float(op->type) &&
                   op->nb[0] == tsr_type_size(op->type);
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY:
            return s0 && cpy_types_ok(s0->type, op->type);
        case TSR_OP_CONCAT:
            return s0 && s1 && s0->type == s1->type && s0->type == op->type && type_is_float(op->type);
        case TSR_OP_REPEAT:
            return s0 && s0->type == op->type && (type_is_float(op->type) || op->type == TSR_TYPE_I32);
        case TSR_OP_DIAG_MASK_INF:
            return s0 && s0->type == TSR_TYPE_F32 && op->type == TSR_TYPE_F32;
        case TSR_OP_SUM: case TSR_OP_SUM_ROWS: case TSR_OP_MEAN:
            return s0 && s0->type == TSR_TYPE_F32 && op->type == TSR_TYPE_F32;
        case TSR_OP_ARGMAX:
            return s0 && s0->type == TSR_TYPE_F32 && op->type == TSR_TYPE_I32;
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID:
            return mul_mat_id_supported(op);
        case TSR_OP_FLASH_ATTN_EXT:
            return flash_attn_supported(op);
        case TSR_OP_TIMESTEP_EMBEDDING: case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_PAD:
        case TSR_OP_PAD_REFLECT_1D: case TSR_OP_ROLL: case TSR_OP_SSM_CONV:
            return models_supported(op);
        case TSR_OP_MUL_MAT:
            if (!s0 || !s1 || op->type != TSR_TYPE_F32 || op->nb[0] != 4) return false;
            if (!type_is_float_or_bf16(s1->type)) return false;
            if (s0->type == TSR_TYPE_Q8_0 || s0->type == TSR_TYPE_Q4_0)
                return s0->nb[0] == tsr_type_size(s0->type) && s0->ne[0] % 32 == 0 && type_is_float(s1->type);
            if (is_dq_type(s0->type))
                return s0->nb[0] == tsr_type_size(s0->type) && s0->ne[0] % tsr_blck_size(s0->type) == 0 && type_is_float(s1->type);
            return type_is_float_or_bf16(s0->type);
        default:
            return false;
    }
}

// Workspace bytes a node needs (0 for most).
inline size_t node_ws_bytes(const tsr_tensor * node) {
    if (node->op == TSR_OP_MUL_MAT) return plan_mul_mat(node).total;
    return 0;
}

// ---- workspace ------------------------------------------------------------------------

bool ensure_workspace(backend_ctx * ctx, size_t need) {
    if (need <= ctx->ws_size) return true;
    TSR_CU_CHECK(cudaStreamSynchronize(ctx->stream), ctx->device);
    ctx->pool->release(ctx->ws);
    ctx->ws = nullptr;
    ctx->ws_size = 0;
    void * p = ctx->pool->acquire(need);
    if (!p) return false;
    ctx->ws = p;
    ctx->ws_size = (need + 255) & ~(size_t) 255;
    ctx->stats.workspace_size = ctx->ws_size;
    // a captured graph bakes in the old workspace address
    if (ctx->graph_exec) { cudaGraphExecDestroy(ctx->graph_exec); ctx->graph_exec = nullptr; }
    ctx->graph_key.clear();
    return true;
}

size_t graph_ws_need(tsr_cgraph * cgraph) {
    size_t need = 0;
    const int n = tsr_graph_n_nodes(cgraph);
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * node = tsr_graph_node(cgraph, i);
        if (!is_view_op(node->op)) need = std::max(need, node_ws_bytes(node));
    }
    return need;
}

// ---- compute --------------------------------------------------------------------------

bool tensor_on_device(const tsr_tensor * t, int device) {
    const tsr_backend_buffer * buf = t->buffer ? t->buffer : (t->view_src ? t->view_src->buffer : nullptr);
    return buf && buft_is_cuda_device(buf->buft) && ((const buffer_ctx *) buf->context)->device == device && t->data;
}

bool compute_node(backend_ctx * ctx, op_ctx & c, tsr_tensor * node) {
    switch (node->op) {
        case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV: return op_binary(c, node);
        case TSR_OP_UNARY: case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG: case TSR_OP_SCALE: case TSR_OP_CLAMP:
        case TSR_OP_SIN: case TSR_OP_COS: case TSR_OP_LEAKY_RELU:   /* issue 17 part A */
            return op_unary(c, node);
        case TSR_OP_GLU:           return op_glu(c, node);
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: return op_norm(c, node);
        /* issue 17 part A */
        case TSR_OP_L2_NORM:       return op_norm(c, node);
        case TSR_OP_TOP_K:         return op_top_k(c, node);
        case TSR_OP_SOFT_MAX:      return op_soft_max(c, node);
        case TSR_OP_ROPE:          return op_rope(c, node);
        case TSR_OP_GET_ROWS:      return op_get_rows(c, node);
        case TSR_OP_SET_ROWS:      return op_set_rows(c, node);
        case TSR_OP_DUP: case TSR_OP_CONT: case TSR_OP_CPY: return op_cpy(c, node);
        case TSR_OP_CONCAT:        return op_concat(c, node);
        case TSR_OP_REPEAT:        return op_repeat(c, node);
        case TSR_OP_DIAG_MASK_INF: return op_diag_mask_inf(c, node);
        case TSR_OP_SUM: case TSR_OP_SUM_ROWS: case TSR_OP_MEAN: case TSR_OP_ARGMAX: return op_reduce(c, node);
        case TSR_OP_MUL_MAT:       return op_mul_mat(c, node);
        /* issue 17 part B */
        case TSR_OP_MUL_MAT_ID:    return op_mul_mat_id(c, node);
        case TSR_OP_FLASH_ATTN_EXT: return op_flash_attn(c, node);
        case TSR_OP_TIMESTEP_EMBEDDING: case TSR_OP_CONV_2D_DW: case TSR_OP_CONV_TRANSPOSE_1D: case TSR_OP_PAD:
        case TSR_OP_PAD_REFLECT_1D: case TSR_OP_ROLL: case TSR_OP_SSM_CONV:
            return op_models(c, node);
        default:
            (void) ctx;
            return tsr_set_error("cuda: op %s (node '%s') is not supported by the CUDA backend", tsr_op_desc(node), node->name);
    }
}

// Launch every node of the graph on the stream (no synchronization).
bool launch_graph(backend_ctx * ctx, tsr_cgraph * cgraph) {
    op_ctx c;
    c.stream = ctx->stream;
    c.device = ctx->device;
    c.cublas = ctx->cublas;
    c.allow_tf32 = ctx->allow_tf32;
    c.ws = (char *) ctx->ws;
    c.ws_size = ctx->ws_size;
    const int n = tsr_graph_n_nodes(cgraph);
    for (int i = 0; i < n; ++i) {
        tsr_tensor * node = tsr_graph_node(cgraph, i);
        if (is_view_op(node->op) || tsr_is_empty(node)) continue;
        c.ws_used = 0;
        if (!compute_node(ctx, c, node)) return false;
        const cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess)
            return tsr_set_error("cuda: launching %s (node %d '%s') failed on device %d: %s", tsr_op_desc(node), i, node->name,
                                 ctx->device, cudaGetErrorString(err));
        ++ctx->stats.nodes_computed;
    }
    return true;
}

// Everything a replay depends on: ops, types, shapes, strides, params and addresses.
void graph_key(backend_ctx * ctx, tsr_cgraph * cgraph, std::vector<int64_t> & key) {
    key.clear();
    key.push_back((int64_t) (uintptr_t) ctx->ws);
    key.push_back(ctx->allow_tf32);
    const int n = tsr_graph_n_nodes(cgraph);
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * t = tsr_graph_node(cgraph, i);
        key.push_back(t->op);
        for (int s = -1; s < TSR_MAX_SRC; ++s) {
            const tsr_tensor * u = s < 0 ? t : t->src[s];
            if (!u) { key.push_back(-1); continue; }
            key.push_back(u->type);
            key.push_back((int64_t) (uintptr_t) u->data);
            for (int d = 0; d < 4; ++d) { key.push_back(u->ne[d]); key.push_back((int64_t) u->nb[d]); }
        }
        for (int j = 0; j < (int) (TSR_MAX_OP_PARAMS / sizeof(int32_t)); ++j) key.push_back(t->op_params[j]);
    }
}

bool compute_captured(backend_ctx * ctx, tsr_cgraph * cgraph) {
    std::vector<int64_t> & key = ctx->key_scratch;
    try {
        graph_key(ctx, cgraph, key);
    } catch (...) {
        return tsr_set_error("CUDA backend: out of memory for the graph capture key (%d nodes)", tsr_graph_n_nodes(cgraph));
    }
    if (ctx->graph_exec && key == ctx->graph_key) {
        TSR_CU_CHECK(cudaGraphLaunch(ctx->graph_exec, ctx->stream), ctx->device);
        ++ctx->stats.graph_replays;
        return true;
    }
    // a graph not computed just before runs as launched: capturing and instantiating it
    // costs more than launching it once (a prompt's graph), and pays only when it repeats
    // (decode steps). swap: both vectors keep their capacity.
    if (key != ctx->last_key) {
        ctx->last_key.swap(key);
        return launch_graph(ctx, cgraph);
    }
    TSR_CU_CHECK(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal), ctx->device);
    const bool ok = launch_graph(ctx, cgraph);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(ctx->stream, &graph);
    if (!ok) { if (graph) cudaGraphDestroy(graph); return false; }
    if (end != cudaSuccess) { cudaGetLastError(); return cu_fail(end, "cudaStreamEndCapture", ctx->device); }
    if (ctx->graph_exec) { cudaGraphExecDestroy(ctx->graph_exec); ctx->graph_exec = nullptr; }
    const cudaError_t inst = cudaGraphInstantiate(&ctx->graph_exec, graph, 0);
    cudaGraphDestroy(graph);
    if (inst != cudaSuccess) { ctx->graph_exec = nullptr; cudaGetLastError(); return cu_fail(inst, "cudaGraphInstantiate", ctx->device); }
    ctx->graph_key.swap(key);
    ++ctx->stats.graph_captures;
    TSR_CU_CHECK(cudaGraphLaunch(ctx->graph_exec, ctx->stream), ctx->device);
    return true;
}

// ---- backend interface --------------------------------------------------------------------

const char * be_get_name(tsr_backend_t backend) { return ctx_of(backend)->name; }

void be_free(tsr_backend_t backend) {
    if (!backend) return;
    backend_ctx * ctx = ctx_of(backend);
    cudaSetDevice(ctx->device);
    if (ctx->stream) cudaStreamSynchronize(ctx->stream);
    if (ctx->graph_exec) cudaGraphExecDestroy(ctx->graph_exec);
    if (ctx->cublas) cublasDestroy(ctx->cublas);
    delete ctx->pool;   // frees the workspace and cuBLAS workspace blocks
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    delete ctx;
    delete backend;
}

tsr_backend_buffer_type_t be_get_default_buffer_type(tsr_backend_t backend) {
    return tsr_backend_cuda_buffer_type(ctx_of(backend)->device);
}

bool be_set_tensor_async(tsr_backend_t backend, tsr_tensor * tensor, const void * data, size_t offset, size_t size) {
    backend_ctx * ctx = ctx_of(backend);
    if (!tensor->buffer || !buft_is_cuda_device(tensor->buffer->buft))
        return tsr_set_error("cuda: set_tensor_async: tensor '%s' is not in a CUDA device buffer", tensor->name);
    TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
    TSR_CU_CHECK(cudaMemcpyAsync((char *) tensor->data + offset, data, size, cudaMemcpyHostToDevice, ctx->stream), ctx->device);
    return true;
}

bool be_get_tensor_async(tsr_backend_t backend, const tsr_tensor * tensor, void * data, size_t offset, size_t size) {
    backend_ctx * ctx = ctx_of(backend);
    if (!tensor->buffer || !buft_is_cuda_device(tensor->buffer->buft))
        return tsr_set_error("cuda: get_tensor_async: tensor '%s' is not in a CUDA device buffer", tensor->name);
    TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
    TSR_CU_CHECK(cudaMemcpyAsync(data, (const char *) tensor->data + offset, size, cudaMemcpyDeviceToHost, ctx->stream), ctx->device);
    return true;
}

void be_synchronize(tsr_backend_t backend) {
    backend_ctx * ctx = ctx_of(backend);
    cudaSetDevice(ctx->device);
    const cudaError_t err = cudaStreamSynchronize(ctx->stream);
    if (err != cudaSuccess) cu_fail(err, "cudaStreamSynchronize", ctx->device);
}

bool be_graph_reserve(tsr_backend_t backend, tsr_cgraph * cgraph) {
    backend_ctx * ctx = ctx_of(backend);
    TSR_CU_CHECK(cudaSetDevice(ctx->device), ctx->device);
    return ensure_workspace(ctx, graph_ws_need(cgraph));
}

tsr_status be_graph_compute(tsr_backend_t backend, tsr_cgraph * cgraph) {
    backend_ctx * ctx = ctx_of(backend);
    cudaError_t err = cudaSetDevice(ctx->device);
    if (err != cudaSuccess) { cu_fail(err, "cudaSetDevice", ctx->device); return TSR_STATUS_FAILED; }
    // check placement and support before anything runs
    const int n = tsr_graph_n_nodes(cgraph);
    for (int i = 0; i < n; ++i) {
        const tsr_tensor * node = tsr_graph_node(cgraph, i);
        if (is_view_op(node->op) || tsr_is_empty(node)) continue;
        if (!supports(node)) {
            tsr_set_error("cuda: node %d '%s' (%s, %s) is not supported by %s", i, node->name, tsr_op_desc(node),
                          tsr_type_name(node->type), ctx->name);
            return TSR_STATUS_FAILED;
        }
        for (int s = -1; s < TSR_MAX_SRC; ++s) {
            const tsr_tensor * t = s < 0 ? node : node->src[s];
            if (t && !tensor_on_device(t, ctx->device)) {
                tsr_set_error("cuda: node %d '%s' (%s): tensor '%s' is not in a %s device buffer", i, node->name,
                              tsr_op_desc(node), t->name, ctx->name);
                return TSR_STATUS_FAILED;
            }
        }
    }
    // the workspace is sized before any node runs (a no-op after graph_reserve)
    if (!ensure_workspace(ctx, graph_ws_need(cgraph))) return TSR_STATUS_ALLOC_FAILED;
    const bool ok = ctx->capture ? compute_captured(ctx, cgraph) : launch_graph(ctx, cgraph);
    err = cudaStreamSynchronize(ctx->stream);
    if (!ok) return TSR_STATUS_FAILED;
    if (err != cudaSuccess) { cu_fail(err, "graph execution (cudaStreamSynchronize)", ctx->device); return TSR_STATUS_FAILED; }
    return TSR_STATUS_SUCCESS;
}

bool be_supports_op(tsr_backend_t, const tsr_tensor * op) { return supports(op); }

// Whether buft is the device memory of device (what its backends and its registry device use).
bool device_uses_buft(int device, tsr_backend_buffer_type_t buft) {
    return buft_is_cuda_device(buft) && ((buft_ctx *) buft->context)->device == device;
}

bool be_supports_buft(tsr_backend_t backend, tsr_backend_buffer_type_t buft) { return device_uses_buft(ctx_of(backend)->device, buft); }

// The registry's device of an index (cuda_registry.cuh).
tsr_backend_dev_t registry_device(int index);

size_t be_get_workspace_size(tsr_backend_t backend) { return ctx_of(backend)->ws_size; }

// Filled member by member: each entry names its member.
constexpr tsr_backend_i backend_iface = [] {
    tsr_backend_i i = {};
    i.get_name = be_get_name;
    i.free = be_free;
    i.get_default_buffer_type = be_get_default_buffer_type;
    i.set_tensor_async = be_set_tensor_async;
    i.get_tensor_async = be_get_tensor_async;
    i.synchronize = be_synchronize;
    i.graph_reserve = be_graph_reserve;
    i.graph_compute = be_graph_compute;
    i.supports_op = be_supports_op;
    i.supports_buft = be_supports_buft;
    i.get_workspace_size = be_get_workspace_size;
    return i;
}();

} // namespace
} // namespace tsr_cuda

// ---- public API ---------------------------------------------------------------------------

extern "C" {

TSR_API_IMPL tsr_backend_t tsr_backend_cuda_init(int device) {
    using namespace tsr_cuda;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        cudaGetLastError();
        tsr_set_error("cuda: no usable CUDA device: cudaGetDeviceCount failed: %s (%s)", cudaGetErrorString(err), cudaGetErrorName(err));
        return nullptr;
    }
    if (device < 0 || device >= n || device >= TSR_CUDA_MAX_DEVICES) {
        tsr_set_error("cuda: device %d does not exist (%d CUDA devices)", device, n);
        return nullptr;
    }
    backend_ctx * ctx = new (std::nothrow) backend_ctx();
    tsr_backend_t backend = new (std::nothrow) tsr_backend();
    if (!ctx || !backend) { delete ctx; delete backend; tsr_set_error("cuda: out of host memory creating a backend"); return nullptr; }
    ctx->device = device;
    snprintf(ctx->name, sizeof(ctx->name), "CUDA%d", device);
    backend->iface = backend_iface;
    backend->device = registry_device(device);
    backend->context = ctx;
    ctx->pool = new (std::nothrow) device_pool(device);
    bool ok = ctx->pool != nullptr;
    if (ok) ok = (err = cudaSetDevice(device)) == cudaSuccess || cu_fail(err, "cudaSetDevice", device);
    if (ok) ok = (err = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking)) == cudaSuccess ||
                 cu_fail(err, "cudaStreamCreateWithFlags", device);
    if (ok) {
        const cublasStatus_t st = cublasCreate(&ctx->cublas);
        if (st != CUBLAS_STATUS_SUCCESS) { ctx->cublas = nullptr; ok = cublas_fail(st, "cublasCreate", device); }
    }
    if (ok) {
        const cublasStatus_t st = cublasSetStream(ctx->cublas, ctx->stream);
        if (st != CUBLAS_STATUS_SUCCESS) ok = cublas_fail(st, "cublasSetStream", device);
    }
    if (ok) {
        ctx->cublas_ws = ctx->pool->acquire(CUBLAS_WS_BYTES);
        ok = ctx->cublas_ws != nullptr;
    }
    if (ok) {
        const cublasStatus_t st = cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, CUBLAS_WS_BYTES);
        if (st != CUBLAS_STATUS_SUCCESS) ok = cublas_fail(st, "cublasSetWorkspace", device);
    }
    if (!ok) {
        cudaGetLastError();
        be_free(backend);
        return nullptr;
    }
    return backend;
}

TSR_API_IMPL bool tsr_backend_is_cuda(tsr_backend_t backend) {
    return backend && backend->iface.get_name == tsr_cuda::be_get_name;
}

TSR_API_IMPL bool tsr_backend_cuda_set_allow_tf32(tsr_backend_t backend, bool allow) {
    if (!tsr_backend_is_cuda(backend)) return tsr_set_error("cuda: set_allow_tf32 on a backend that is not CUDA");
    tsr_cuda::ctx_of(backend)->allow_tf32 = allow;
    return true;
}

TSR_API_IMPL bool tsr_backend_cuda_set_graph_capture(tsr_backend_t backend, bool enable) {
    if (!tsr_backend_is_cuda(backend)) return tsr_set_error("cuda: set_graph_capture on a backend that is not CUDA");
    tsr_cuda::backend_ctx * ctx = tsr_cuda::ctx_of(backend);
    ctx->capture = enable;
    if (!enable) ctx->last_key.clear();   // capture turned on again starts afresh
    if (!enable && ctx->graph_exec) {
        cudaSetDevice(ctx->device);
        cudaStreamSynchronize(ctx->stream);
        cudaGraphExecDestroy(ctx->graph_exec);
        ctx->graph_exec = nullptr;
        ctx->graph_key.clear();
    }
    return true;
}

TSR_API_IMPL int tsr_backend_cuda_get_device(tsr_backend_t backend) {
    return tsr_backend_is_cuda(backend) ? tsr_cuda::ctx_of(backend)->device : -1;
}

TSR_API_IMPL void * tsr_backend_cuda_get_stream(tsr_backend_t backend) {
    return tsr_backend_is_cuda(backend) ? (void *) tsr_cuda::ctx_of(backend)->stream : nullptr;
}

TSR_API_IMPL bool tsr_backend_cuda_get_stats(tsr_backend_t backend, struct tsr_cuda_stats * stats) {
    if (!tsr_backend_is_cuda(backend)) return tsr_set_error("cuda: get_stats on a backend that is not CUDA");
    if (!stats) return tsr_set_error("cuda: get_stats: stats is NULL");
    tsr_cuda::backend_ctx * ctx = tsr_cuda::ctx_of(backend);
    *stats = ctx->stats;
    stats->pool_cached_bytes = ctx->pool->cached_bytes();
    stats->pool_hits = ctx->pool->hits();
    stats->pool_misses = ctx->pool->misses();
    stats->workspace_size = ctx->ws_size;
    return true;
}

} // extern "C"
