// The memory layer tests' context: no_alloc, room for n_tensors headers and one graph,
// freed at the end of the scope.
#pragma once

#include "tessera/tessera.h"

struct ctx_guard {
    tsr_context * ctx;
    explicit ctx_guard(size_t n_tensors, size_t graph_size = TSR_DEFAULT_GRAPH_SIZE) {
        tsr_init_params p = {n_tensors * tsr_tensor_overhead() + tsr_graph_overhead_custom(graph_size, false), nullptr, true};
        ctx = tsr_init(p);
    }
    ~ctx_guard() { tsr_free(ctx); }
    ctx_guard(const ctx_guard &) = delete;
    ctx_guard & operator=(const ctx_guard &) = delete;
};
