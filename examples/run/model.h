// model.h - GPT-2 and LLaMA-family models as llama.cpp stores them in GGUF: hyper-
// parameters from `<arch>.*` metadata, weights by llama.cpp's tensor names, loaded into a
// WEIGHTS buffer of a backend with tsr_gguf_load_tensors (chunked, never the whole file).
//
// Tensor names (ne[0] first, as stored):
//   token_embd.weight [n_embd, n_vocab]      position_embd.weight [n_embd, n_ctx] (gpt2)
//   blk.N.attn_norm.weight (+ .bias gpt2)    blk.N.ffn_norm.weight (+ .bias gpt2)
//   llama: blk.N.attn_q/attn_k/attn_v/attn_output.weight, ffn_gate/ffn_up/ffn_down.weight
//   gpt2 : blk.N.attn_qkv.weight [n_embd, 3 n_embd] + bias, attn_output, ffn_up, ffn_down (+ bias)
//   output_norm.weight (+ .bias gpt2), output.weight [n_embd, n_vocab] (absent: tied to token_embd)
#pragma once

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"
#include "tokenizer.h"

#include <cmath>
#include <string>
#include <vector>

namespace trun {

enum class arch { gpt2, llama };

inline const char * arch_name(arch a) { return a == arch::gpt2 ? "gpt2" : "llama"; }

struct hparams {
    arch a = arch::gpt2;
    int n_vocab = 0;
    int n_ctx = 0;        // training context (also the position table size for gpt2)
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;    // < n_head: grouped-query attention
    int n_ff = 0;
    int n_rot = 0;        // rope dims (llama)
    float eps = 1e-5f;    // layer_norm_epsilon (gpt2) / layer_norm_rms_epsilon (llama)
    float rope_base = 10000.0f;

    int head_dim() const { return n_embd / n_head; }
    int n_embd_gqa() const { return head_dim() * n_head_kv; }
};

struct layer_weights {
    tsr_tensor * attn_norm = nullptr, * attn_norm_b = nullptr;
    tsr_tensor * wq = nullptr, * wk = nullptr, * wv = nullptr;   // llama
    tsr_tensor * wqkv = nullptr, * bqkv = nullptr;               // gpt2
    tsr_tensor * wo = nullptr, * bo = nullptr;
    tsr_tensor * ffn_norm = nullptr, * ffn_norm_b = nullptr;
    tsr_tensor * ffn_gate = nullptr;                             // llama
    tsr_tensor * ffn_up = nullptr, * ffn_up_b = nullptr;
    tsr_tensor * ffn_down = nullptr, * ffn_down_b = nullptr;
};

struct weights {
    tsr_tensor * tok_embd = nullptr;
    tsr_tensor * pos_embd = nullptr;   // gpt2
    tsr_tensor * out_norm = nullptr, * out_norm_b = nullptr;
    tsr_tensor * output = nullptr;     // == tok_embd when tied
    std::vector<layer_weights> layers;
};

// ---- hyper-parameters ---------------------------------------------------------------------

inline bool hparams_from_gguf(const tsr_gguf_context * g, hparams & hp, std::string & err) {
    const int64_t ka = tsr_gguf_find_key(g, "general.architecture");
    if (ka < 0 || tsr_gguf_get_kv_type(g, ka) != TSR_GGUF_TYPE_STRING) { err = "missing general.architecture"; return false; }
    const std::string an = tsr_gguf_get_val_str(g, ka);
    if (an == "gpt2") hp.a = arch::gpt2;
    else if (an == "llama") hp.a = arch::llama;
    else { err = "unsupported architecture '" + an + "' (supported: gpt2, llama)"; return false; }
    auto get_int = [&](const char * suffix, int & out, bool required) {
        const std::string key = an + "." + suffix;
        const int64_t k = tsr_gguf_find_key(g, key.c_str());
        if (k < 0) {
            if (required) err = "missing " + key;
            return !required;
        }
        switch (tsr_gguf_get_kv_type(g, k)) {
            case TSR_GGUF_TYPE_UINT32: out = (int) tsr_gguf_get_val_u32(g, k); break;
            case TSR_GGUF_TYPE_INT32:  out = (int) tsr_gguf_get_val_i32(g, k); break;
            case TSR_GGUF_TYPE_UINT64: out = (int) tsr_gguf_get_val_u64(g, k); break;
            case TSR_GGUF_TYPE_INT64:  out = (int) tsr_gguf_get_val_i64(g, k); break;
            default: err = key + " is not an integer"; return false;
        }
        return true;
    };
    auto get_float = [&](const char * suffix, float & out) {
        const std::string key = an + "." + suffix;
        const int64_t k = tsr_gguf_find_key(g, key.c_str());
        if (k < 0) return;
        if (tsr_gguf_get_kv_type(g, k) == TSR_GGUF_TYPE_FLOAT32) out = tsr_gguf_get_val_f32(g, k);
        else if (tsr_gguf_get_kv_type(g, k) == TSR_GGUF_TYPE_FLOAT64) out = (float) tsr_gguf_get_val_f64(g, k);
    };
    hp.n_head_kv = 0;
    if (!get_int("context_length", hp.n_ctx, true) || !get_int("embedding_length", hp.n_embd, true) ||
        !get_int("block_count", hp.n_layer, true) || !get_int("feed_forward_length", hp.n_ff, true) ||
        !get_int("attention.head_count", hp.n_head, true) || !get_int("attention.head_count_kv", hp.n_head_kv, false)) {
        return false;
    }
    if (hp.n_head_kv == 0) hp.n_head_kv = hp.n_head;
    if (hp.n_embd <= 0 || hp.n_head <= 0 || hp.n_embd % hp.n_head != 0 || hp.n_head_kv <= 0 || hp.n_head % hp.n_head_kv != 0 ||
        hp.n_layer <= 0 || hp.n_ff <= 0 || hp.n_ctx <= 0) {
        err = "inconsistent hyper-parameters (n_embd " + std::to_string(hp.n_embd) + ", n_head " + std::to_string(hp.n_head) +
              ", n_head_kv " + std::to_string(hp.n_head_kv) + ", n_layer " + std::to_string(hp.n_layer) + ")";
        return false;
    }
    hp.n_rot = hp.head_dim();
    if (!get_int("rope.dimension_count", hp.n_rot, false)) return false;
    get_float("rope.freq_base", hp.rope_base);
    get_float(hp.a == arch::gpt2 ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon", hp.eps);
    const int64_t kt = tsr_gguf_find_key(g, "tokenizer.ggml.tokens");
    hp.n_vocab = kt >= 0 && tsr_gguf_get_kv_type(g, kt) == TSR_GGUF_TYPE_ARRAY ? (int) tsr_gguf_get_arr_n(g, kt) : 0;
    return true;
}

inline bool hparams_to_gguf(tsr_gguf_context * g, const hparams & hp) {
    const std::string an = arch_name(hp.a);
    auto k = [&](const char * s) { return an + "." + s; };
    bool ok = tsr_gguf_set_val_str(g, "general.architecture", an.c_str());
    ok = ok && tsr_gguf_set_val_u32(g, k("context_length").c_str(), (uint32_t) hp.n_ctx);
    ok = ok && tsr_gguf_set_val_u32(g, k("embedding_length").c_str(), (uint32_t) hp.n_embd);
    ok = ok && tsr_gguf_set_val_u32(g, k("block_count").c_str(), (uint32_t) hp.n_layer);
    ok = ok && tsr_gguf_set_val_u32(g, k("feed_forward_length").c_str(), (uint32_t) hp.n_ff);
    ok = ok && tsr_gguf_set_val_u32(g, k("attention.head_count").c_str(), (uint32_t) hp.n_head);
    ok = ok && tsr_gguf_set_val_u32(g, k("attention.head_count_kv").c_str(), (uint32_t) hp.n_head_kv);
    if (hp.a == arch::gpt2) {
        ok = ok && tsr_gguf_set_val_f32(g, k("attention.layer_norm_epsilon").c_str(), hp.eps);
    } else {
        ok = ok && tsr_gguf_set_val_f32(g, k("attention.layer_norm_rms_epsilon").c_str(), hp.eps);
        ok = ok && tsr_gguf_set_val_u32(g, k("rope.dimension_count").c_str(), (uint32_t) hp.n_rot);
        ok = ok && tsr_gguf_set_val_f32(g, k("rope.freq_base").c_str(), hp.rope_base);
    }
    return ok;
}

// ---- weights --------------------------------------------------------------------------------

// Number of weight tensors a model has (for sizing a context).
inline int n_weight_tensors(const hparams & hp, bool tied_output) {
    const int per_layer = hp.a == arch::gpt2 ? 12 : 9;
    return per_layer * hp.n_layer + (hp.a == arch::gpt2 ? 4 : 2) + (tied_output ? 0 : 1);
}

// The types of a model's weight matrices: one type for all, or a mix as llama.cpp's
// llama-quantize makes them (Q4_K_M: Q6_K for output.weight and for attn_v / ffn_down of
// the layers its use_more_bits picks, Q4_K elsewhere).
struct weight_types {
    tsr_type base = TSR_TYPE_F32;
    tsr_type output = TSR_TYPE_F32;   // output.weight (an untied one)
    tsr_type more_bits = TSR_TYPE_F32;  // attn_v / ffn_down of the layers more_bits_layer picks
    weight_types() = default;
    weight_types(tsr_type t) : base(t), output(t), more_bits(t) {}  // NOLINT: one type for all, implicitly
    weight_types(tsr_type b, tsr_type out, tsr_type more) : base(b), output(out), more_bits(more) {}
    // llama.cpp's use_more_bits: the first and last eighth of the layers and every third between
    static bool more_bits_layer(int il, int n_layer) {
        return il < n_layer / 8 || il >= 7 * n_layer / 8 || (il - n_layer / 8) % 3 == 2;
    }
    tsr_type layer_type(int il, int n_layer) const { return more_bits_layer(il, n_layer) ? more_bits : base; }
};

inline weight_types q4_k_m_types() { return weight_types(TSR_TYPE_Q4_K, TSR_TYPE_Q6_K, TSR_TYPE_Q6_K); }

// Create every weight tensor (named as llama.cpp does) in ctx: matrices in the types wt
// says (their rows must be a multiple of the block size), norms, biases and positions in F32.
inline bool create_weights(tsr_context * ctx, const hparams & hp, const weight_types & wt, bool tied_output, weights & w,
                           std::string & err) {
    const tsr_type wtype = wt.base;
    const int64_t E = hp.n_embd, V = hp.n_vocab, F = hp.n_ff, G = hp.n_embd_gqa();
    bool ok = true;
    auto mk = [&](tsr_type t, int64_t ne0, int64_t ne1, const std::string & name) -> tsr_tensor * {
        if (!ok) return nullptr;
        tsr_tensor * x = ne1 > 0 ? tsr_new_tensor_2d(ctx, t, ne0, ne1) : tsr_new_tensor_1d(ctx, t, ne0);
        if (!x) { ok = false; err = "creating " + name + ": " + tsr_last_error(); return nullptr; }
        tsr_set_name(x, name.c_str());
        return x;
    };
    const tsr_type F32 = TSR_TYPE_F32;
    w = weights();
    w.tok_embd = mk(wtype, E, V, "token_embd.weight");
    if (hp.a == arch::gpt2) w.pos_embd = mk(F32, E, hp.n_ctx, "position_embd.weight");
    w.layers.resize((size_t) hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        layer_weights & L = w.layers[(size_t) il];
        const std::string p = "blk." + std::to_string(il) + ".";
        const tsr_type more = wt.layer_type(il, hp.n_layer);
        L.attn_norm = mk(F32, E, 0, p + "attn_norm.weight");
        if (hp.a == arch::gpt2) {
            L.attn_norm_b = mk(F32, E, 0, p + "attn_norm.bias");
            L.wqkv = mk(wtype, E, 3 * E, p + "attn_qkv.weight");
            L.bqkv = mk(F32, 3 * E, 0, p + "attn_qkv.bias");
            L.wo = mk(wtype, E, E, p + "attn_output.weight");
            L.bo = mk(F32, E, 0, p + "attn_output.bias");
            L.ffn_norm = mk(F32, E, 0, p + "ffn_norm.weight");
            L.ffn_norm_b = mk(F32, E, 0, p + "ffn_norm.bias");
            L.ffn_up = mk(wtype, E, F, p + "ffn_up.weight");
            L.ffn_up_b = mk(F32, F, 0, p + "ffn_up.bias");
            L.ffn_down = mk(more, F, E, p + "ffn_down.weight");
            L.ffn_down_b = mk(F32, E, 0, p + "ffn_down.bias");
        } else {
            L.wq = mk(wtype, E, E, p + "attn_q.weight");
            L.wk = mk(wtype, E, G, p + "attn_k.weight");
            L.wv = mk(more, E, G, p + "attn_v.weight");
            L.wo = mk(wtype, E, E, p + "attn_output.weight");
            L.ffn_norm = mk(F32, E, 0, p + "ffn_norm.weight");
            L.ffn_gate = mk(wtype, E, F, p + "ffn_gate.weight");
            L.ffn_up = mk(wtype, E, F, p + "ffn_up.weight");
            L.ffn_down = mk(more, F, E, p + "ffn_down.weight");
        }
    }
    w.out_norm = mk(F32, E, 0, "output_norm.weight");
    if (hp.a == arch::gpt2) w.out_norm_b = mk(F32, E, 0, "output_norm.bias");
    w.output = tied_output ? w.tok_embd : mk(wt.output, E, V, "output.weight");
    return ok;
}

// Find every weight of an architecture in ctx by name and check its shape.
inline bool bind_weights(tsr_context * ctx, const hparams & hp, weights & w, std::string & err) {
    const int64_t E = hp.n_embd, V = hp.n_vocab, F = hp.n_ff, G = hp.n_embd_gqa();
    bool ok = true;
    auto get = [&](const std::string & name, int64_t ne0, int64_t ne1, bool required) -> tsr_tensor * {
        if (!ok) return nullptr;
        tsr_tensor * t = tsr_get_tensor(ctx, name.c_str());
        if (!t) {
            if (required) { ok = false; err = "model file lacks tensor '" + name + "'"; }
            return nullptr;
        }
        if (t->ne[0] != ne0 || t->ne[1] != (ne1 > 0 ? ne1 : 1) || t->ne[2] != 1 || t->ne[3] != 1) {
            ok = false;
            err = "tensor '" + name + "' has shape [" + std::to_string(t->ne[0]) + ", " + std::to_string(t->ne[1]) + ", " +
                  std::to_string(t->ne[2]) + "], expected [" + std::to_string(ne0) + ", " + std::to_string(ne1 > 0 ? ne1 : 1) + "]";
            return nullptr;
        }
        return t;
    };
    w = weights();
    w.tok_embd = get("token_embd.weight", E, V, true);
    if (hp.a == arch::gpt2) w.pos_embd = get("position_embd.weight", E, hp.n_ctx, true);
    w.layers.resize((size_t) hp.n_layer);
    for (int il = 0; il < hp.n_layer && ok; ++il) {
        layer_weights & L = w.layers[(size_t) il];
        const std::string p = "blk." + std::to_string(il) + ".";
        L.attn_norm = get(p + "attn_norm.weight", E, 0, true);
        if (hp.a == arch::gpt2) {
            L.attn_norm_b = get(p + "attn_norm.bias", E, 0, true);
            L.wqkv = get(p + "attn_qkv.weight", E, 3 * E, true);
            L.bqkv = get(p + "attn_qkv.bias", 3 * E, 0, true);
            L.wo = get(p + "attn_output.weight", E, E, true);
            L.bo = get(p + "attn_output.bias", E, 0, true);
            L.ffn_norm = get(p + "ffn_norm.weight", E, 0, true);
            L.ffn_norm_b = get(p + "ffn_norm.bias", E, 0, true);
            L.ffn_up = get(p + "ffn_up.weight", E, F, true);
            L.ffn_up_b = get(p + "ffn_up.bias", F, 0, true);
            L.ffn_down = get(p + "ffn_down.weight", F, E, true);
            L.ffn_down_b = get(p + "ffn_down.bias", E, 0, true);
        } else {
            L.wq = get(p + "attn_q.weight", E, E, true);
            L.wk = get(p + "attn_k.weight", E, G, true);
            L.wv = get(p + "attn_v.weight", E, G, true);
            L.wo = get(p + "attn_output.weight", E, E, true);
            L.ffn_norm = get(p + "ffn_norm.weight", E, 0, true);
            L.ffn_gate = get(p + "ffn_gate.weight", E, F, true);
            L.ffn_up = get(p + "ffn_up.weight", E, F, true);
            L.ffn_down = get(p + "ffn_down.weight", F, E, true);
        }
    }
    w.out_norm = get("output_norm.weight", E, 0, true);
    if (hp.a == arch::gpt2) w.out_norm_b = get("output_norm.bias", E, 0, true);
    w.output = get("output.weight", E, V, false);
    if (ok && !w.output) w.output = w.tok_embd;  // tied embeddings
    return ok;
}

// A model: hyper-parameters, tokenizer, weights in one WEIGHTS buffer.
struct model {
    hparams hp;
    tokenizer tok;
    weights w;
    tsr_gguf_context * gguf = nullptr;
    tsr_context * ctx_w = nullptr;          // tensor headers
    tsr_backend_buffer_t buf_w = nullptr;   // weights buffer
    std::string path;
    size_t file_size = 0;

    model() = default;
    model(const model &) = delete;
    model & operator=(const model &) = delete;
    ~model() { release(); }
    void release() {
        tsr_backend_buffer_free(buf_w);
        tsr_free(ctx_w);
        tsr_gguf_free(gguf);
        buf_w = nullptr;
        ctx_w = nullptr;
        gguf = nullptr;
    }
};

// Load a GGUF model into a backend: metadata, tokenizer, weights buffer, tensor data.
inline bool load_model(const char * path, tsr_backend_t backend, model & m, tsr_gguf_progress_cb progress, void * user,
                       std::string & err) {
    m.release();
    m.path = path;
    tsr_gguf_init_params ip = {true, &m.ctx_w};
    m.gguf = tsr_gguf_init_from_file(path, ip);
    if (!m.gguf) { err = tsr_last_error(); return false; }
    m.file_size = tsr_gguf_get_data_offset(m.gguf) + tsr_gguf_get_data_size(m.gguf);
    if (!hparams_from_gguf(m.gguf, m.hp, err)) return false;
    if (!m.tok.load(m.gguf, err)) return false;
    if (m.hp.n_vocab != m.tok.n_vocab()) { err = "vocabulary size mismatch"; return false; }
    if (!bind_weights(m.ctx_w, m.hp, m.w, err)) return false;
    m.buf_w = tsr_backend_alloc_ctx_tensors(m.ctx_w, backend);
    if (!m.buf_w) { err = std::string("allocating the weights buffer: ") + tsr_last_error(); return false; }
    tsr_backend_buffer_set_usage(m.buf_w, TSR_BUFFER_USAGE_WEIGHTS);
    if (!tsr_gguf_load_tensors(m.gguf, m.ctx_w, path, progress, user)) { err = tsr_last_error(); return false; }
    return true;
}

} // namespace trun
