// graph.h - the forward graph of GPT-2 / LLaMA / Qwen2 / Qwen3, the KV cache and an evaluation session.
//
// Memory, split by purpose:
//   weights  : the model's WEIGHTS buffer (model.h)
//   KV cache : one persistent buffer of its own: per layer K and V as [n_embd_gqa, n_ctx]
//              (one row per position, all heads side by side), F16 by default.
//   compute  : activations, one buffer per backend planned by the scheduler's gallocr;
//              reserved once with the worst-case graph (a full batch attending to the whole
//              context) and reused for every token.
//   scratch  : per-op workspace inside each backend.
//
// Backends: the model's (model.h): the CPU alone, or a GPU first and the CPU last. The
// scheduler (tessera/sched.h) runs each op where its weights are when that backend has it,
// and on the CPU otherwise; a layer's K/V cache lives where its layer's weights do.
//
// New K/V rows are written with tsr_set_rows at the rows the positions input names (the
// stores are expanded into the graph before the attention that reads the cache, so they
// run first, as in llama.cpp); a backend without set_rows for the cache's type gets
// tsr_cpy into views of the cache at n_past instead. Attention reads views of the first
// n_kv cache rows, where n_kv is n_past + n_tokens padded up to 32 (masked), so
// consecutive decode steps build graphs of the same sizes and gallocr re-applies its
// cached plan; with set_rows they are equal node for node, addresses included, so a CUDA
// backend replays its captured CUDA graph for 32 tokens at a time.
//
// Attention: flash_attn_ext by default. It never materializes the n_kv x n_tokens score
// matrix in the compute buffer, so the compute buffer stays small for long contexts.
// mul_mat + soft_max_ext (the classic path) is kept as an option (--no-flash-attn) and
// is tested against it; it needs V transposed, done with a cont(permute) per layer. A
// backend without flash_attn_ext leaves it to the CPU (the scheduler's fallback).
#pragma once

#include "model.h"
#include "tessera/alloc.h"
#include "tessera/sched.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace trun {

struct session_params {
    int n_ctx = 0;                   // 0: the model's context length
    int n_batch = 64;                // max tokens per evaluation
    tsr_type kv_type = TSR_TYPE_F16;
    bool flash_attn = true;
    bool all_logits = false;         // keep logits for every token (tests) or only the last
    bool parallel = false;           // the scheduler's rotating input copies and events (sched.h)
};

struct session {
    const model * m = nullptr;
    session_params sp;
    int n_ctx = 0;
    int n_past = 0;

    tsr_context * ctx_kv = nullptr;
    tsr_backend_buffer_t buf_kv = nullptr;      // the layers on the model's main backend
    tsr_backend_buffer_t buf_kv_cpu = nullptr;  // next to a GPU: the layers on the CPU
    std::vector<tsr_tensor *> k, v;
    std::vector<char> kv_set_rows;   // per layer: its cache's backend runs set_rows into it

    tsr_backend_sched_t sched = nullptr;
    std::vector<uint8_t> meta;       // arena for graph tensor headers (reused)
    tsr_context * ctx_g = nullptr;
    size_t graph_size = 0;

    std::vector<float> logits;       // n_vocab x (all_logits ? n_tokens : 1)
    std::vector<float> mask_host;
    std::vector<int32_t> pos_host;

    // statistics: compute buffers (summed over backends, and per backend in the model's
    // order) at reserve; splits and input copies of the last graph
    size_t compute_size = 0, compute_lower_bound = 0;
    std::vector<tsr_backend_sched_buffer_info> compute;
    int n_graph_nodes = 0;
    int n_splits = 0, n_split_inputs = 0;

    session() = default;
    session(const session &) = delete;
    session & operator=(const session &) = delete;
    ~session() { release(); }
    void release() {
        tsr_backend_sched_free(sched);
        tsr_free(ctx_g);
        tsr_backend_buffer_free(buf_kv);
        tsr_backend_buffer_free(buf_kv_cpu);
        tsr_free(ctx_kv);
        sched = nullptr;
        ctx_g = nullptr;
        buf_kv = nullptr;
        buf_kv_cpu = nullptr;
        ctx_kv = nullptr;
        k.clear();
        v.clear();
        kv_set_rows.clear();
    }
};

inline int kv_pad(int n) { return (n + 31) / 32 * 32; }

// Graph nodes (and tensor headers) per layer: a dense layer needs ~40; a mixture-of-experts
// feed-forward adds its router and one view and add per used expert (moe_ffn).
inline int graph_nodes_per_layer(const hparams & hp) { return 48 + (hp.is_moe() ? 24 + 2 * hp.n_expert_used : 0); }

// The mixture-of-experts feed-forward of Mixtral / Qwen3-MoE, as llama.cpp's build_moe_ffn
// (softmax gating, the chosen experts' weights normalised to sum to 1): cur [n_embd, T] ->
// [n_embd, T]. NULL with err on failure.
inline tsr_tensor * moe_ffn(tsr_context * ctx, const hparams & hp, const layer_weights & L, tsr_tensor * cur, std::string & err) {
    const int64_t E = hp.n_embd, T = cur->ne[1], NX = hp.n_expert, NU = hp.n_expert_used;
    bool ok = true;
    // the first failure's message is kept; the ops after it get NULL and fail quietly
    auto chk = [&](tsr_tensor * t, const char * what) -> tsr_tensor * {
        if (!t && ok) { ok = false; err = std::string("building ") + what + ": " + tsr_last_error(); }
        return t;
    };
    tsr_tensor * probs = chk(tsr_soft_max(ctx, chk(tsr_mul_mat(ctx, L.ffn_gate_inp, cur), "router logits")), "router softmax");  // [NX, T]
    tsr_tensor * chosen = chk(tsr_top_k(ctx, probs, (int) NU), "expert choice");                                              // I32 [NU, T]
    tsr_tensor * w = chk(tsr_get_rows(ctx, chk(tsr_reshape_3d(ctx, probs, 1, NX, T), "probs"), chosen), "expert weights");  // [1, NU, T]
    w = chk(tsr_reshape_2d(ctx, w, NU, T), "expert weights");
    w = chk(tsr_div(ctx, w, chk(tsr_sum_rows(ctx, w), "weight sum")), "normalised expert weights");
    w = chk(tsr_reshape_3d(ctx, w, 1, NU, T), "expert weights");
    tsr_tensor * x = chk(tsr_reshape_3d(ctx, cur, E, 1, T), "experts' input");
    tsr_tensor * up = chk(tsr_mul_mat_id(ctx, L.ffn_up_exps, x, chosen), "experts' up");        // [n_ff_exp, NU, T]
    tsr_tensor * gate = chk(tsr_mul_mat_id(ctx, L.ffn_gate_exps, x, chosen), "experts' gate");
    tsr_tensor * h = chk(tsr_swiglu_split(ctx, gate, up), "experts' swiglu");
    tsr_tensor * outs = chk(tsr_mul_mat_id(ctx, L.ffn_down_exps, h, chosen), "experts' down");  // [E, NU, T]
    outs = chk(tsr_mul(ctx, outs, w), "weighted experts");
    if (!ok) return nullptr;
    auto expert_out = [&](int64_t e) { return chk(tsr_view_2d(ctx, outs, E, T, outs->nb[2], outs->nb[1] * (size_t) e), "expert output"); };
    tsr_tensor * sum = expert_out(0);
    for (int64_t e = 1; e < NU; ++e) sum = chk(tsr_add(ctx, sum, expert_out(e)), "sum over experts");
    return ok ? sum : nullptr;
}

struct graph_io {
    tsr_cgraph * gf = nullptr;
    tsr_tensor * tokens = nullptr, * pos = nullptr, * mask = nullptr, * logits = nullptr;
    int n_kv = 0;
};

// Build the graph that evaluates n_tokens new tokens at position n_past.
inline bool build_graph(session & s, int n_tokens, int n_past, bool all_logits, graph_io & io, std::string & err) {
    const hparams & hp = s.m->hp;
    const weights & w = s.m->w;
    tsr_backend_sched_reset(s.sched);  // the last graph's copies and sources go before its tensors do
    tsr_reset(s.ctx_g);
    tsr_context * ctx = s.ctx_g;
    const int T = n_tokens;
    const int hd = hp.head_dim(), H = hp.n_head, Hkv = hp.n_head_kv, E = hp.n_embd, G = hp.n_embd_gqa();
    const int n_kv = std::min(s.n_ctx, kv_pad(n_past + T));
    const float kq_scale = 1.0f / std::sqrt((float) hd);
    io = graph_io();
    io.n_kv = n_kv;
    bool ok = true;
    // every op result is checked once through this
    auto chk = [&](tsr_tensor * t, const char * what) -> tsr_tensor * {
        if (!t && ok) { ok = false; err = std::string("building ") + what + ": " + tsr_last_error(); }
        return t;
    };

    io.gf = tsr_new_graph_custom(ctx, s.graph_size, false);
    if (!io.gf) { err = std::string("new graph: ") + tsr_last_error(); return false; }
    io.tokens = chk(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T), "tokens");
    io.pos = chk(tsr_new_tensor_1d(ctx, TSR_TYPE_I32, T), "positions");
    io.mask = chk(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n_kv, T), "mask");
    if (!ok) return false;
    tsr_set_name(io.tokens, "inp_tokens");
    tsr_set_name(io.pos, "inp_pos");
    tsr_set_name(io.mask, "kq_mask");
    tsr_set_input(io.tokens);
    tsr_set_input(io.pos);
    tsr_set_input(io.mask);

    tsr_tensor * x = chk(tsr_get_rows(ctx, w.tok_embd, io.tokens), "token embeddings");
    if (ok && hp.a == arch::gpt2) x = chk(tsr_add(ctx, x, chk(tsr_get_rows(ctx, w.pos_embd, io.pos), "positions")), "embeddings");

    auto norm = [&](tsr_tensor * t, tsr_tensor * g, tsr_tensor * b) -> tsr_tensor * {
        if (!ok) return nullptr;
        if (hp.a == arch::gpt2) {
            t = chk(tsr_norm(ctx, t, hp.eps), "norm");
            t = chk(tsr_mul(ctx, t, g), "norm weight");
            return chk(tsr_add(ctx, t, b), "norm bias");
        }
        t = chk(tsr_rms_norm(ctx, t, hp.eps), "rms_norm");
        return chk(tsr_mul(ctx, t, g), "norm weight");
    };
    auto linear = [&](tsr_tensor * t, tsr_tensor * W, tsr_tensor * b) -> tsr_tensor * {
        if (!ok) return nullptr;
        t = chk(tsr_mul_mat(ctx, W, t), "mul_mat");
        return b && ok ? chk(tsr_add(ctx, t, b), "bias") : t;
    };

    const size_t k_row = tsr_row_size(s.sp.kv_type, G);
    const size_t hd_row = tsr_row_size(s.sp.kv_type, hd);

    for (int il = 0; il < hp.n_layer && ok; ++il) {
        const layer_weights & L = w.layers[(size_t) il];
        tsr_tensor * cur = norm(x, L.attn_norm, L.attn_norm_b);
        tsr_tensor * q = nullptr, * kc = nullptr, * vc = nullptr;
        if (hp.a == arch::gpt2) {
            tsr_tensor * qkv = linear(cur, L.wqkv, L.bqkv);
            if (!ok) break;
            // K and V go from their views of the fused projection straight into the cache (a
            // strided copy): a cont of each first would be one more node and barrier per layer
            q = chk(tsr_cont(ctx, tsr_view_2d(ctx, qkv, E, T, qkv->nb[1], 0)), "q");
            kc = chk(tsr_view_2d(ctx, qkv, E, T, qkv->nb[1], sizeof(float) * (size_t) E), "k");
            vc = chk(tsr_view_2d(ctx, qkv, E, T, qkv->nb[1], sizeof(float) * (size_t) 2 * E), "v");
            if (!ok) break;
            q = chk(tsr_reshape_3d(ctx, q, hd, H, T), "q reshape");
        } else {
            q = chk(tsr_reshape_3d(ctx, linear(cur, L.wq, L.bq), hd, H, T), "q");
            kc = chk(tsr_reshape_3d(ctx, linear(cur, L.wk, L.bk), hd, Hkv, T), "k");
            vc = linear(cur, L.wv, L.bv);
            if (L.q_norm) {  // qwen3: each head RMS-normed before RoPE
                q = norm(q, L.q_norm, nullptr);
                kc = norm(kc, L.k_norm, nullptr);
            }
            if (!ok) break;
            q = chk(tsr_rope_ext(ctx, q, io.pos, nullptr, hp.n_rot, rope_mode(hp.a), hp.n_ctx, hp.rope_base, 1.0f,
                                 0.0f, 1.0f, 0.0f, 0.0f), "rope q");
            kc = chk(tsr_rope_ext(ctx, kc, io.pos, nullptr, hp.n_rot, rope_mode(hp.a), hp.n_ctx, hp.rope_base, 1.0f,
                                  0.0f, 1.0f, 0.0f, 0.0f), "rope k");
        }
        if (!ok) break;
        // store the new K and V rows at positions [n_past, n_past + T)
        tsr_tensor * k_store = nullptr, * v_store = nullptr;
        if (s.kv_set_rows[(size_t) il]) {
            if (kc->ne[0] != G) kc = chk(tsr_reshape_2d(ctx, kc, G, T), "k rows");
            if (!ok) break;
            k_store = chk(tsr_set_rows(ctx, s.k[(size_t) il], kc, io.pos), "k store");
            v_store = chk(tsr_set_rows(ctx, s.v[(size_t) il], vc, io.pos), "v store");
        } else {
            tsr_tensor * k_dst = chk(tsr_view_2d(ctx, s.k[(size_t) il], G, T, k_row, k_row * (size_t) n_past), "k cache view");
            tsr_tensor * v_dst = chk(tsr_view_2d(ctx, s.v[(size_t) il], G, T, k_row, k_row * (size_t) n_past), "v cache view");
            if (!ok) break;
            k_store = chk(tsr_cpy(ctx, kc, k_dst), "k store");
            v_store = chk(tsr_cpy(ctx, vc, v_dst), "v store");
        }
        if (!ok) break;
        if (!tsr_build_forward_expand(io.gf, k_store) || !tsr_build_forward_expand(io.gf, v_store)) {
            err = std::string("graph too small: ") + tsr_last_error();
            return false;
        }
        // the first n_kv rows of the cache as [hd, n_kv, Hkv]
        tsr_tensor * K = chk(tsr_view_3d(ctx, s.k[(size_t) il], hd, n_kv, Hkv, k_row, hd_row, 0), "K");
        tsr_tensor * V = chk(tsr_view_3d(ctx, s.v[(size_t) il], hd, n_kv, Hkv, k_row, hd_row, 0), "V");
        tsr_tensor * Q = chk(tsr_permute(ctx, q, 0, 2, 1, 3), "Q");  // [hd, T, H]
        if (!ok) break;
        tsr_tensor * attn = nullptr;
        if (s.sp.flash_attn) {
            attn = chk(tsr_flash_attn_ext(ctx, Q, K, V, io.mask, kq_scale, 0.0f, 0.0f), "flash_attn_ext");  // [hd, H, T]
            if (ok) attn = chk(tsr_reshape_2d(ctx, attn, hp.n_embd_q(), T), "attn reshape");
        } else {
            tsr_tensor * kq = chk(tsr_mul_mat(ctx, K, Q), "kq");                               // [n_kv, T, H]
            kq = chk(tsr_soft_max_ext(ctx, kq, io.mask, kq_scale, 0.0f), "soft_max_ext");
            tsr_tensor * Vt = chk(tsr_cont(ctx, tsr_permute(ctx, V, 1, 0, 2, 3)), "V^T");        // [n_kv, hd, Hkv]
            if (!ok) break;
            tsr_tensor * kqv = chk(tsr_mul_mat(ctx, Vt, kq), "kqv");                           // [hd, T, H]
            if (!ok) break;
            attn = chk(tsr_cont_2d(ctx, tsr_permute(ctx, kqv, 0, 2, 1, 3), hp.n_embd_q(), T), "attn merge");
        }
        cur = linear(attn, L.wo, L.bo);
        x = chk(tsr_add(ctx, x, cur), "residual");
        // feed-forward
        cur = norm(x, L.ffn_norm, L.ffn_norm_b);
        if (hp.a == arch::gpt2) {
            cur = linear(cur, L.ffn_up, L.ffn_up_b);
            cur = chk(tsr_gelu(ctx, cur), "gelu");
            cur = linear(cur, L.ffn_down, L.ffn_down_b);
        } else if (hp.is_moe()) {
            if (ok && !(cur = moe_ffn(ctx, hp, L, cur, err))) ok = false;
        } else {
            tsr_tensor * g = linear(cur, L.ffn_gate, nullptr);
            tsr_tensor * u = linear(cur, L.ffn_up, nullptr);
            cur = chk(tsr_swiglu_split(ctx, g, u), "swiglu");
            cur = linear(cur, L.ffn_down, nullptr);
        }
        x = chk(tsr_add(ctx, x, cur), "residual");
    }
    if (!ok) return false;
    if (!all_logits && T > 1) x = chk(tsr_view_2d(ctx, x, E, 1, x->nb[1], x->nb[1] * (size_t) (T - 1)), "last token");
    x = norm(x, w.out_norm, w.out_norm_b);
    io.logits = linear(x, w.output, w.output_b);
    if (!ok) return false;
    tsr_set_name(io.logits, "logits");
    tsr_set_output(io.logits);
    if (!tsr_build_forward_expand(io.gf, io.logits)) { err = std::string("graph too small: ") + tsr_last_error(); return false; }
    return true;
}

// The KV cache: per layer K and V, on the GPU for the GPU's layers, else on the CPU.
inline bool kv_init(session & s, std::string & err) {
    const model & m = *s.m;
    const hparams & hp = m.hp;
    tsr_init_params kp = {(size_t) (2 * hp.n_layer + 1) * tsr_tensor_overhead(), nullptr, true};
    s.ctx_kv = tsr_init(kp);
    if (!s.ctx_kv) { err = std::string("KV context: ") + tsr_last_error(); return false; }
    std::vector<tsr_tensor *> main_kv, cpu_kv;
    std::vector<bool> on_main;   // per layer: its cache is on the main backend (else the CPU)
    for (int il = 0; il < hp.n_layer; ++il) {
        tsr_tensor * kt = tsr_new_tensor_2d(s.ctx_kv, s.sp.kv_type, hp.n_embd_gqa(), s.n_ctx);
        tsr_tensor * vt = tsr_new_tensor_2d(s.ctx_kv, s.sp.kv_type, hp.n_embd_gqa(), s.n_ctx);
        if (!kt || !vt) { err = std::string("KV tensors: ") + tsr_last_error(); return false; }
        tsr_format_name(kt, "cache_k_l%d", il);
        tsr_format_name(vt, "cache_v_l%d", il);
        s.k.push_back(kt);
        s.v.push_back(vt);
        on_main.push_back(!m.on_gpu() || m.layer_on_gpu(il));
        std::vector<tsr_tensor *> & where = on_main.back() ? main_kv : cpu_kv;
        where.push_back(kt);
        where.push_back(vt);
    }
    const std::string what = "allocating the KV cache: ";
    if (!main_kv.empty()) {
        s.buf_kv = alloc_tensors(main_kv, tsr_backend_get_default_buffer_type(m.backends.front()), TSR_BUFFER_USAGE_ANY, err);
        if (!s.buf_kv) { err = what + err; return false; }
        tsr_backend_buffer_clear(s.buf_kv, 0);  // masked rows must be finite
    }
    if (!cpu_kv.empty()) {
        s.buf_kv_cpu = alloc_tensors(cpu_kv, tsr_backend_get_default_buffer_type(m.cpu()), TSR_BUFFER_USAGE_ANY, err);
        if (!s.buf_kv_cpu) { err = what + err; return false; }
        tsr_backend_buffer_clear(s.buf_kv_cpu, 0);
    }
    // whether the main backend and the CPU take set_rows into a cache (all of one type): asked
    // of each with a one-row store into layer 0's cache
    if (s.k.empty()) return true;
    tsr_context * pc = tsr_init(tsr_init_params{3 * tsr_tensor_overhead(), nullptr, true});
    tsr_tensor * rows = pc ? tsr_new_tensor_2d(pc, TSR_TYPE_F32, hp.n_embd_gqa(), 1) : nullptr;
    tsr_tensor * idx = rows ? tsr_new_tensor_1d(pc, TSR_TYPE_I32, 1) : nullptr;
    tsr_tensor * probe = idx ? tsr_set_rows(pc, s.k.front(), rows, idx) : nullptr;
    if (!probe) { err = std::string("the KV store probe: ") + tsr_last_error(); tsr_free(pc); return false; }
    const bool main_takes = tsr_backend_supports_op(m.backends.front(), probe), cpu_takes = tsr_backend_supports_op(m.cpu(), probe);
    tsr_free(pc);
    for (bool main : on_main) s.kv_set_rows.push_back(main ? main_takes : cpu_takes);
    return true;
}

// Create the KV cache and the scheduler over the model's backends; reserve every compute
// buffer for the worst case (n_batch tokens attending to the whole context). `backend`
// must be the model's main backend (the one it was loaded with).
inline bool session_init(session & s, const model & m, tsr_backend_t backend, const session_params & sp, std::string & err) {
    s.release();
    if (m.backends.empty() || backend != m.backends.front()) {
        err = std::string("session_init: the model was not loaded on the ") + tsr_backend_name(backend) + " backend";
        return false;
    }
    s.m = &m;
    s.sp = sp;
    const hparams & hp = m.hp;
    s.n_ctx = sp.n_ctx > 0 ? sp.n_ctx : hp.n_ctx;
    if (hp.a == arch::gpt2) s.n_ctx = std::min(s.n_ctx, hp.n_ctx);  // the position table ends there
    s.sp.n_batch = std::max(1, std::min(sp.n_batch, s.n_ctx));
    s.n_past = 0;
    if (!kv_init(s, err)) return false;

    // graph metadata arena
    s.graph_size = (size_t) std::max(TSR_DEFAULT_GRAPH_SIZE, graph_nodes_per_layer(hp) * hp.n_layer + 64);
    const size_t meta_size = s.graph_size * tsr_tensor_overhead() + tsr_graph_overhead_custom(s.graph_size, false);
    s.ctx_g = tsr_init(tsr_init_params{meta_size, nullptr, true});
    if (!s.ctx_g) { err = std::string("graph context: ") + tsr_last_error(); return false; }

    std::vector<tsr_backend_t> backends = m.backends;
    s.sched = tsr_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 2 * s.graph_size, sp.parallel);
    if (!s.sched) { err = std::string("scheduler: ") + tsr_last_error(); return false; }
    graph_io io;
    if (!build_graph(s, s.sp.n_batch, s.n_ctx - s.sp.n_batch, sp.all_logits, io, err)) return false;
    if (!tsr_backend_sched_reserve(s.sched, io.gf)) { err = std::string("reserving the compute buffers: ") + tsr_last_error(); return false; }
    s.compute.assign(backends.size(), tsr_backend_sched_buffer_info{});
    for (size_t i = 0; i < backends.size(); ++i) {
        if (!tsr_backend_sched_get_buffer_info(s.sched, backends[i], &s.compute[i])) { err = tsr_last_error(); return false; }
        s.compute_size += s.compute[i].buffer_size;
        s.compute_lower_bound += s.compute[i].lower_bound;
    }
    s.n_graph_nodes = tsr_graph_n_nodes(io.gf);
    s.n_splits = tsr_backend_sched_get_n_splits(s.sched);
    s.n_split_inputs = tsr_backend_sched_get_n_split_inputs(s.sched);
    return true;
}

// Evaluate tokens at the current position (in batches of n_batch); logits of the last token
// (or of every token with all_logits) end up in s.logits.
inline bool session_eval(session & s, const int32_t * tokens, int n_tokens, std::string & err) {
    const hparams & hp = s.m->hp;
    if (n_tokens <= 0) { err = "no tokens to evaluate"; return false; }
    if (s.n_past + n_tokens > s.n_ctx) {
        err = "context full: " + std::to_string(s.n_past) + " + " + std::to_string(n_tokens) + " tokens > n_ctx " + std::to_string(s.n_ctx);
        return false;
    }
    for (int i = 0; i < n_tokens; ++i) {
        if (tokens[i] < 0 || tokens[i] >= hp.n_vocab) { err = "token id " + std::to_string(tokens[i]) + " out of range"; return false; }
    }
    const bool all = s.sp.all_logits;
    s.logits.assign((size_t) hp.n_vocab * (all ? n_tokens : 1), 0.0f);
    for (int i0 = 0; i0 < n_tokens; i0 += s.sp.n_batch) {
        const int T = std::min(s.sp.n_batch, n_tokens - i0);
        graph_io io;
        if (!build_graph(s, T, s.n_past, all, io, err)) return false;
        if (!tsr_backend_sched_alloc_graph(s.sched, io.gf)) { err = std::string("alloc_graph: ") + tsr_last_error(); return false; }
        s.pos_host.resize((size_t) T);
        for (int t = 0; t < T; ++t) s.pos_host[(size_t) t] = s.n_past + t;
        s.mask_host.assign((size_t) io.n_kv * T, 0.0f);
        for (int t = 0; t < T; ++t) {
            for (int j = 0; j < io.n_kv; ++j) {
                if (j > s.n_past + t) s.mask_host[(size_t) t * io.n_kv + j] = -INFINITY;
            }
        }
        if (!tsr_backend_tensor_set(io.tokens, tokens + i0, 0, sizeof(int32_t) * (size_t) T) ||
            !tsr_backend_tensor_set(io.pos, s.pos_host.data(), 0, sizeof(int32_t) * (size_t) T) ||
            !tsr_backend_tensor_set(io.mask, s.mask_host.data(), 0, sizeof(float) * s.mask_host.size())) {
            err = std::string("setting inputs: ") + tsr_last_error();
            return false;
        }
        const tsr_status st = tsr_backend_sched_graph_compute(s.sched, io.gf);
        s.n_splits = tsr_backend_sched_get_n_splits(s.sched);
        s.n_split_inputs = tsr_backend_sched_get_n_split_inputs(s.sched);
        if (st != TSR_STATUS_SUCCESS) { err = std::string("graph_compute: ") + tsr_status_to_string(st) + ": " + tsr_last_error(); return false; }
        s.n_past += T;
        const size_t n_out = (size_t) hp.n_vocab * (all ? T : 1);
        float * dst = all ? s.logits.data() + (size_t) hp.n_vocab * i0 : s.logits.data();
        if (!tsr_backend_tensor_get(io.logits, dst, 0, n_out * sizeof(float))) { err = std::string("reading logits: ") + tsr_last_error(); return false; }
    }
    return true;
}

} // namespace trun
