// model.h - GPT-2, LLaMA, Qwen2 and Qwen3 models as llama.cpp stores them in GGUF: hyper-
// parameters from `<arch>.*` metadata, weights by llama.cpp's tensor names, loaded into a
// WEIGHTS buffer of a backend with tsr_gguf_load_tensors (chunked, never the whole file).
//
// Tensor names (ne[0] first, as stored):
//   token_embd.weight [n_embd, n_vocab]      position_embd.weight [n_embd, n_ctx] (gpt2)
//   blk.N.attn_norm.weight (+ .bias gpt2)    blk.N.ffn_norm.weight (+ .bias gpt2)
//   llama: blk.N.attn_q/attn_k/attn_v/attn_output.weight, ffn_gate/ffn_up/ffn_down.weight
//   gpt2 : blk.N.attn_qkv.weight [n_embd, 3 n_embd] + bias, attn_output, ffn_up, ffn_down (+ bias)
//   qwen2: llama's, plus blk.N.attn_q/attn_k/attn_v.bias (optional for llama too, as in llama.cpp),
//          output.bias (optional); RoPE NEOX over whole heads
//   qwen3: llama's, plus blk.N.attn_q_norm/attn_k_norm.weight [head_dim] (RMSNorm of each head
//          before RoPE); the head dimension may be <arch>.attention.key_length, not n_embd / n_head,
//          so attn_q.weight is [n_embd, head_dim * n_head] and attn_output.weight its transpose
//   output_norm.weight (+ .bias gpt2), output.weight [n_embd, n_vocab] (absent: tied to token_embd)
//   mixture of experts (llama files with <arch>.expert_count > 0 — Mixtral —, and qwen3moe: qwen3's
//   attention), in place of ffn_gate/ffn_up/ffn_down:
//          blk.N.ffn_gate_inp.weight [n_embd, n_expert] (the router),
//          blk.N.ffn_gate_exps/ffn_up_exps.weight [n_embd, n_ff_exp, n_expert],
//          blk.N.ffn_down_exps.weight [n_ff_exp, n_embd, n_expert]; n_ff_exp is
//          <arch>.expert_feed_forward_length (qwen3moe) or feed_forward_length
#pragma once

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
#include "hparams_checks.h"
#include "tokenizer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#include <string>
#include <vector>

namespace trun {

enum class arch { gpt2, llama, qwen2, qwen3, qwen3moe };

inline const char * arch_name(arch a) {
    switch (a) {
        case arch::gpt2: return "gpt2";
        case arch::llama: return "llama";
        case arch::qwen2: return "qwen2";
        case arch::qwen3: return "qwen3";
        case arch::qwen3moe: return "qwen3moe";
    }
    return "?";
}

// Qwen's RoPE turns dimension i with i + n_rot/2 (NEOX); llama's turns neighbours.
inline int rope_mode(arch a) { return a == arch::qwen2 || a == arch::qwen3 || a == arch::qwen3moe ? TSR_ROPE_TYPE_NEOX : TSR_ROPE_TYPE_NORMAL; }

// Qwen3's attention: each head RMS-normed before RoPE.
inline bool has_qk_norm(arch a) { return a == arch::qwen3 || a == arch::qwen3moe; }

// The architectures whose files may hold experts (llama.cpp reads expert_count for them).
inline bool may_have_experts(arch a) { return a == arch::llama || a == arch::qwen3moe; }

struct hparams {
    arch a = arch::gpt2;
    int n_vocab = 0;
    int n_ctx = 0;        // training context (also the position table size for gpt2)
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;    // < n_head: grouped-query attention
    int n_ff = 0;
    int n_rot = 0;        // rope dims (all but gpt2)
    int n_embd_head = 0;  // <arch>.attention.key_length; 0: n_embd / n_head
    float eps = 1e-5f;    // layer_norm_epsilon (gpt2) / layer_norm_rms_epsilon (the others)
    float rope_base = 10000.0f;
    int n_expert = 0;       // <arch>.expert_count; 0: a dense feed-forward
    int n_expert_used = 0;  // <arch>.expert_used_count: experts each token goes through
    int n_ff_exp = 0;       // <arch>.expert_feed_forward_length; 0: n_ff

    bool is_moe() const { return n_expert > 0; }
    int ff_exp() const { return n_ff_exp > 0 ? n_ff_exp : n_ff; }
    int head_dim() const { return n_embd_head > 0 ? n_embd_head : n_embd / n_head; }
    int n_embd_q() const { return head_dim() * n_head; }      // the width of Q and of attention's output
    int n_embd_gqa() const { return head_dim() * n_head_kv; }
};

struct layer_weights {
    tsr_tensor * attn_norm = nullptr, * attn_norm_b = nullptr;
    tsr_tensor * wq = nullptr, * wk = nullptr, * wv = nullptr;   // llama, qwen
    tsr_tensor * bq = nullptr, * bk = nullptr, * bv = nullptr;   // qwen2 (optional for llama)
    tsr_tensor * q_norm = nullptr, * k_norm = nullptr;           // qwen3
    tsr_tensor * wqkv = nullptr, * bqkv = nullptr;               // gpt2
    tsr_tensor * wo = nullptr, * bo = nullptr;
    tsr_tensor * ffn_norm = nullptr, * ffn_norm_b = nullptr;
    tsr_tensor * ffn_gate = nullptr;                             // llama
    tsr_tensor * ffn_up = nullptr, * ffn_up_b = nullptr;
    tsr_tensor * ffn_down = nullptr, * ffn_down_b = nullptr;
    tsr_tensor * ffn_gate_inp = nullptr;                         // mixture of experts: the router
    tsr_tensor * ffn_gate_exps = nullptr, * ffn_up_exps = nullptr, * ffn_down_exps = nullptr;
};

struct weights {
    tsr_tensor * tok_embd = nullptr;
    tsr_tensor * pos_embd = nullptr;   // gpt2
    tsr_tensor * out_norm = nullptr, * out_norm_b = nullptr;
    tsr_tensor * output = nullptr;     // == tok_embd when tied
    tsr_tensor * output_b = nullptr;   // qwen2 (optional)
    std::vector<layer_weights> layers;
};

// ---- hyper-parameters ---------------------------------------------------------------------

// Ranges of the counts read from a file. Generous (the largest published models are far
// inside them), and bounded so that nothing sized from them can overflow an int. Layers:
// a session's graph needs ~21 KiB of tensor headers per layer whatever the layer's size,
// so 1024 layers (published models have at most ~160) keep that within 22 MiB.
constexpr int64_t k_max_layers = 1 << 10;
constexpr int64_t k_max_embd = 1 << 20;
constexpr int64_t k_max_ff = 1 << 22;
constexpr int64_t k_max_experts = 1 << 10;  // published models have at most 512

inline bool read_arch(const tsr_gguf_context * g, hparams & hp, std::string & an, std::string & err) {
    const int64_t ka = tsr_gguf_find_key(g, "general.architecture");
    if (ka < 0 || tsr_gguf_get_kv_type(g, ka) != TSR_GGUF_TYPE_STRING) { err = "missing general.architecture"; return false; }
    an = tsr_gguf_get_val_str(g, ka);
    for (arch a : {arch::gpt2, arch::llama, arch::qwen2, arch::qwen3, arch::qwen3moe}) {
        if (an == arch_name(a)) { hp.a = a; return true; }
    }
    err = "unsupported architecture '" + an + "' (supported: gpt2, llama, qwen2, qwen3, qwen3moe)";
    return false;
}

// "<key> = <a> does not divide <key> = <b>" when a does not divide b
inline bool check_divides(const std::string & key_a, int a, const std::string & key_b, int b, std::string & err) {
    if (b % a == 0) return true;
    err = key_a + " = " + std::to_string(a) + " does not divide " + key_b + " = " + std::to_string(b);
    return false;
}

// The head dimension: n_embd / n_head unless <arch>.attention.key_length says otherwise
// (llama.cpp reads it for every architecture; Qwen3-0.6B has 16 heads of 128 in 1024).
// The KV cache and attention here use one dimension for K and V, so value_length (which
// defaults to n_embd / n_head too) must equal it; and all heads together stay within
// k_max_embd, so no width sized from them overflows.
inline bool read_head_dim(const tsr_gguf_context * g, const std::string & an, hparams & hp, std::string & err) {
    const std::string k_key = an + ".attention.key_length", k_val = an + ".attention.value_length";
    int kl = 0, vl = 0;
    if (!read_count(g, k_key, 1, k_max_embd, false, kl, err) || !read_count(g, k_val, 1, k_max_embd, false, vl, err)) return false;
    const int per_head = hp.n_embd % hp.n_head == 0 ? hp.n_embd / hp.n_head : 0;
    if (kl == 0) kl = per_head;
    if (vl == 0) vl = per_head;
    if (kl == 0 || vl == 0) return check_divides(an + ".attention.head_count", hp.n_head, an + ".embedding_length", hp.n_embd, err);
    if (kl != vl) {
        err = k_val + " = " + std::to_string(vl) + " differs from the key length " + std::to_string(kl) +
              " (K and V heads of different sizes are not supported)";
        return false;
    }
    if ((int64_t) kl * hp.n_head > k_max_embd) {
        err = k_key + " = " + std::to_string(kl) + " times " + an + ".attention.head_count = " + std::to_string(hp.n_head) +
              " is out of range [1, " + std::to_string(k_max_embd) + "]";
        return false;
    }
    hp.n_embd_head = kl == per_head ? 0 : kl;
    return true;
}

// The rotated dimensions of each head: llama's rope.dimension_count may rotate part of a
// head; qwen2/qwen3 rotate whole heads (llama.cpp asserts n_rot == head dimension for them).
inline bool read_rope_dims(const tsr_gguf_context * g, const std::string & an, hparams & hp, std::string & err) {
    const std::string key = an + ".rope.dimension_count";
    hp.n_rot = hp.head_dim();
    if (!read_count(g, key, 1, hp.head_dim(), false, hp.n_rot, err)) return false;
    if (hp.n_rot % 2 != 0) {
        err = key + " = " + std::to_string(hp.n_rot) + " is odd (rotary embedding turns pairs of dimensions)";
        return false;
    }
    if (hp.a != arch::llama && hp.n_rot != hp.head_dim()) {
        err = key + " = " + std::to_string(hp.n_rot) + " differs from the head dimension " + std::to_string(hp.head_dim()) + " (" +
              an + " rotates whole heads)";
        return false;
    }
    return true;
}

// Every count in its range; the head counts dividing what they split.
inline bool read_counts(const tsr_gguf_context * g, const std::string & an, hparams & hp, std::string & err) {
    auto key = [&](const char * suffix) { return an + "." + suffix; };
    if (!read_count(g, key("context_length"), 1, INT32_MAX, true, hp.n_ctx, err) ||
        !read_count(g, key("embedding_length"), 1, k_max_embd, true, hp.n_embd, err) ||
        !read_count(g, key("block_count"), 1, k_max_layers, true, hp.n_layer, err) ||
        !read_count(g, key("feed_forward_length"), 1, k_max_ff, true, hp.n_ff, err) ||
        !read_count(g, key("attention.head_count"), 1, hp.n_embd, true, hp.n_head, err)) {
        return false;
    }
    if (hp.a == arch::gpt2 ? !check_divides(key("attention.head_count"), hp.n_head, key("embedding_length"), hp.n_embd, err)
                           : !read_head_dim(g, an, hp, err)) {
        return false;
    }
    hp.n_head_kv = 0;  // absent or 0: as many as the query heads
    if (!read_count(g, key("attention.head_count_kv"), 0, hp.n_head, false, hp.n_head_kv, err)) return false;
    if (hp.n_head_kv == 0) hp.n_head_kv = hp.n_head;
    if (!check_divides(key("attention.head_count_kv"), hp.n_head_kv, key("attention.head_count"), hp.n_head, err)) return false;
    hp.n_rot = hp.head_dim();  // gpt2 has no rotary embedding; the others: read_rope_dims
    return true;
}

// The experts' counts (llama: optional, Mixtral's files have them; qwen3moe: required).
inline bool read_experts(const tsr_gguf_context * g, const std::string & an, hparams & hp, std::string & err) {
    hp.n_expert = hp.n_expert_used = hp.n_ff_exp = 0;
    if (!may_have_experts(hp.a)) return true;
    const std::string k_count = an + ".expert_count";
    if (!read_count(g, k_count, hp.a == arch::qwen3moe ? 1 : 0, k_max_experts, hp.a == arch::qwen3moe, hp.n_expert, err)) return false;
    if (hp.n_expert == 0) return true;
    return read_count(g, an + ".expert_used_count", 1, hp.n_expert, true, hp.n_expert_used, err) &&
           read_count(g, an + ".expert_feed_forward_length", 1, k_max_ff, false, hp.n_ff_exp, err);
}

// A float key, if present, finite and in [lo, hi].
inline bool read_float(const tsr_gguf_context * g, const std::string & key, float lo, float hi, float & out, std::string & err) {
    const int64_t k = tsr_gguf_find_key(g, key.c_str());
    if (k < 0) return true;
    double v = 0.0;
    if (tsr_gguf_get_kv_type(g, k) == TSR_GGUF_TYPE_FLOAT32) v = tsr_gguf_get_val_f32(g, k);
    else if (tsr_gguf_get_kv_type(g, k) == TSR_GGUF_TYPE_FLOAT64) v = tsr_gguf_get_val_f64(g, k);
    else { err = key + " has type " + tsr_gguf_type_name(tsr_gguf_get_kv_type(g, k)) + ", expected a float"; return false; }
    if (!(v >= lo && v <= hi)) {  // NaN fails too
        char msg[160];
        snprintf(msg, sizeof msg, " = %g is out of range [%g, %g]", v, (double) lo, (double) hi);
        err = key + msg;
        return false;
    }
    out = (float) v;
    return true;
}

// The vocabulary's size: the entries of tokenizer.ggml.tokens, at least one, at most INT32_MAX.
inline bool read_vocab_size(const tsr_gguf_context * g, hparams & hp, std::string & err) {
    const int64_t kt = tsr_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (kt < 0 || tsr_gguf_get_kv_type(g, kt) != TSR_GGUF_TYPE_ARRAY) { err = "missing tokenizer.ggml.tokens (the vocabulary)"; return false; }
    const size_t n = tsr_gguf_get_arr_n(g, kt);
    if (n < 1 || n > (size_t) INT32_MAX) {
        err = "the vocabulary tokenizer.ggml.tokens has " + std::to_string(n) + " entries, out of range [1, " + std::to_string(INT32_MAX) + "]";
        return false;
    }
    hp.n_vocab = (int) n;
    return true;
}

// The counts against the tensors the file holds, before anything is sized from them.
inline bool check_counts_against_tensors(const tsr_gguf_context * g, const std::string & an, const hparams & hp, std::string & err) {
    const int64_t n_layers = layers_in_file(g);
    if (n_layers != hp.n_layer) {
        err = an + ".block_count = " + std::to_string(hp.n_layer) + ", but the file's tensors hold " + std::to_string(n_layers) +
              " layers" + (n_layers ? " (blk.0 to blk." + std::to_string(n_layers - 1) + ")" : "");
        return false;
    }
    const std::string vocab = "the vocabulary size (entries of tokenizer.ggml.tokens)";
    bool ok = count_matches_tensor(g, an + ".embedding_length", hp.n_embd, "token_embd.weight", 0, err) &&
              count_matches_tensor(g, vocab, hp.n_vocab, "token_embd.weight", 1, err) &&
              count_matches_tensor(g, vocab, hp.n_vocab, "output.weight", 1, err) &&
              count_matches_tensor(g, an + ".feed_forward_length", hp.n_ff, "blk.0.ffn_up.weight", 1, err);
    if (hp.a == arch::gpt2) return ok && count_matches_tensor(g, an + ".context_length", hp.n_ctx, "position_embd.weight", 1, err);
    const std::string hd = std::to_string(hp.head_dim());
    const std::string kv_width = an + ".attention.head_count_kv * the head dimension (" + std::to_string(hp.n_head_kv) + " * " + hd + ")";
    const std::string q_width = an + ".attention.head_count * the head dimension (" + std::to_string(hp.n_head) + " * " + hd + ")";
    const std::string n_ff_exp = an + (hp.n_ff_exp > 0 ? ".expert_feed_forward_length" : ".feed_forward_length");
    return ok && count_matches_tensor(g, kv_width, hp.n_embd_gqa(), "blk.0.attn_k.weight", 1, err) &&
           count_matches_tensor(g, q_width, hp.n_embd_q(), "blk.0.attn_q.weight", 1, err) &&
           count_matches_tensor(g, "the head dimension", hp.head_dim(), "blk.0.attn_q_norm.weight", 0, err) &&
           count_matches_tensor(g, an + ".expert_count", hp.n_expert, "blk.0.ffn_gate_inp.weight", 1, err) &&
           count_matches_tensor(g, an + ".expert_count", hp.n_expert, "blk.0.ffn_up_exps.weight", 2, err) &&
           count_matches_tensor(g, n_ff_exp, hp.ff_exp(), "blk.0.ffn_up_exps.weight", 1, err);
}

// Hyper-parameters from `<arch>.*` metadata: every count range-checked at its full width
// and cross-checked against the file's tensors (hparams_checks.h), so nothing sized from
// them is larger than the file justifies.
inline bool hparams_from_gguf(const tsr_gguf_context * g, hparams & hp, std::string & err) {
    std::string an;
    if (!read_arch(g, hp, an, err) || !read_counts(g, an, hp, err) || !read_experts(g, an, hp, err)) return false;
    const std::string eps_key = an + (hp.a == arch::gpt2 ? ".attention.layer_norm_epsilon" : ".attention.layer_norm_rms_epsilon");
    return read_float(g, an + ".rope.freq_base", 1e-6f, 1e12f, hp.rope_base, err) && read_float(g, eps_key, 0.0f, 1.0f, hp.eps, err) &&
           read_vocab_size(g, hp, err) && check_counts_against_tensors(g, an, hp, err) &&
           (hp.a == arch::gpt2 || read_rope_dims(g, an, hp, err));
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
        if (hp.n_embd_head > 0) {
            ok = ok && tsr_gguf_set_val_u32(g, k("attention.key_length").c_str(), (uint32_t) hp.n_embd_head);
            ok = ok && tsr_gguf_set_val_u32(g, k("attention.value_length").c_str(), (uint32_t) hp.n_embd_head);
        }
    }
    if (hp.is_moe()) {
        ok = ok && tsr_gguf_set_val_u32(g, k("expert_count").c_str(), (uint32_t) hp.n_expert);
        ok = ok && tsr_gguf_set_val_u32(g, k("expert_used_count").c_str(), (uint32_t) hp.n_expert_used);
        if (hp.n_ff_exp > 0) ok = ok && tsr_gguf_set_val_u32(g, k("expert_feed_forward_length").c_str(), (uint32_t) hp.n_ff_exp);
    }
    return ok;
}

// ---- weights --------------------------------------------------------------------------------

// Number of weight tensors a model has (for sizing a context).
inline int n_weight_tensors(const hparams & hp, bool tied_output) {
    const int per_layer = (hp.a == arch::gpt2 ? 12 : hp.a == arch::qwen2 ? 12 : has_qk_norm(hp.a) ? 11 : 9) + (hp.is_moe() ? 1 : 0);
    return per_layer * hp.n_layer + (hp.a == arch::gpt2 ? 4 : 2) + (tied_output ? 0 : 1);
}

// The types of a model's weight matrices: one type for all, or a mix as llama.cpp's
// llama-quantize makes them (Q4_K_M: Q6_K for the output matrix, which is token_embd.weight
// where the output is tied, and for attn_v (GPT-2: attn_qkv) / ffn_down of the layers its
// use_more_bits picks, Q4_K elsewhere; scripts/llamacpp-quant-check.sh compares every
// tensor's type with llama.cpp's own quantizer's).
struct weight_types {
    tsr_type base = TSR_TYPE_F32;
    tsr_type output = TSR_TYPE_F32;   // output.weight, or token_embd.weight when it is the output
    tsr_type more_bits = TSR_TYPE_F32;  // attn_v / attn_qkv / ffn_down of the layers more_bits_layer picks
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
// Q5_K_M: the same choice of tensors, Q5_K elsewhere
inline weight_types q5_k_m_types() { return weight_types(TSR_TYPE_Q5_K, TSR_TYPE_Q6_K, TSR_TYPE_Q6_K); }

// Create every weight tensor (named as llama.cpp does) in ctx: matrices in the types wt
// says (their rows must be a multiple of the block size), norms, biases and positions in F32.
inline bool create_weights(tsr_context * ctx, const hparams & hp, const weight_types & wt, bool tied_output, weights & w,
                           std::string & err) {
    const tsr_type wtype = wt.base;
    const int64_t E = hp.n_embd, V = hp.n_vocab, F = hp.n_ff, G = hp.n_embd_gqa();
    bool ok = true;
    auto mk = [&](tsr_type t, int64_t ne0, int64_t ne1, const std::string & name, int64_t ne2 = 0) -> tsr_tensor * {
        if (!ok) return nullptr;
        tsr_tensor * x = ne2 > 0 ? tsr_new_tensor_3d(ctx, t, ne0, ne1, ne2)
                       : ne1 > 0 ? tsr_new_tensor_2d(ctx, t, ne0, ne1) : tsr_new_tensor_1d(ctx, t, ne0);
        if (!x) { ok = false; err = "creating " + name + ": " + tsr_last_error(); return nullptr; }
        tsr_set_name(x, name.c_str());
        return x;
    };
    const tsr_type F32 = TSR_TYPE_F32;
    w = weights();
    w.tok_embd = mk(tied_output ? wt.output : wtype, E, V, "token_embd.weight");
    if (hp.a == arch::gpt2) w.pos_embd = mk(F32, E, hp.n_ctx, "position_embd.weight");
    w.layers.resize((size_t) hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        layer_weights & L = w.layers[(size_t) il];
        const std::string p = "blk." + std::to_string(il) + ".";
        const tsr_type more = wt.layer_type(il, hp.n_layer);
        L.attn_norm = mk(F32, E, 0, p + "attn_norm.weight");
        if (hp.a == arch::gpt2) {
            L.attn_norm_b = mk(F32, E, 0, p + "attn_norm.bias");
            L.wqkv = mk(more, E, 3 * E, p + "attn_qkv.weight");  // llama.cpp counts it as an attn_v
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
            const int64_t Q = hp.n_embd_q();
            L.wq = mk(wtype, E, Q, p + "attn_q.weight");
            L.wk = mk(wtype, E, G, p + "attn_k.weight");
            L.wv = mk(more, E, G, p + "attn_v.weight");
            if (hp.a == arch::qwen2) {
                L.bq = mk(F32, Q, 0, p + "attn_q.bias");
                L.bk = mk(F32, G, 0, p + "attn_k.bias");
                L.bv = mk(F32, G, 0, p + "attn_v.bias");
            }
            if (has_qk_norm(hp.a)) {
                L.q_norm = mk(F32, hp.head_dim(), 0, p + "attn_q_norm.weight");
                L.k_norm = mk(F32, hp.head_dim(), 0, p + "attn_k_norm.weight");
            }
            L.wo = mk(wtype, Q, E, p + "attn_output.weight");
            L.ffn_norm = mk(F32, E, 0, p + "ffn_norm.weight");
            if (hp.is_moe()) {  // the router stays F32, as llama-quantize leaves it
                const int64_t FX = hp.ff_exp(), NX = hp.n_expert;
                L.ffn_gate_inp = mk(F32, E, NX, p + "ffn_gate_inp.weight");
                L.ffn_gate_exps = mk(wtype, E, FX, p + "ffn_gate_exps.weight", NX);
                L.ffn_up_exps = mk(wtype, E, FX, p + "ffn_up_exps.weight", NX);
                L.ffn_down_exps = mk(more, FX, E, p + "ffn_down_exps.weight", NX);
            } else {
                L.ffn_gate = mk(wtype, E, F, p + "ffn_gate.weight");
                L.ffn_up = mk(wtype, E, F, p + "ffn_up.weight");
                L.ffn_down = mk(more, F, E, p + "ffn_down.weight");
            }
        }
    }
    w.out_norm = mk(F32, E, 0, "output_norm.weight");
    if (hp.a == arch::gpt2) w.out_norm_b = mk(F32, E, 0, "output_norm.bias");
    w.output = tied_output ? w.tok_embd : mk(wt.output, E, V, "output.weight");
    return ok;
}

// The weights' headers (no data) in a new no_alloc context sized for them: where the
// runner, the benchmarks and the tests place weights in buffers or size a data context.
// nullptr on failure (err says why).
inline tsr_context * new_weight_headers(const hparams & hp, const weight_types & wt, bool tied_output, weights & w, std::string & err) {
    tsr_context * ctx = tsr_init(tsr_init_params{(size_t) (n_weight_tensors(hp, tied_output) + 2) * tsr_tensor_overhead(), nullptr, true});
    if (!ctx) { err = tsr_last_error(); return nullptr; }
    if (create_weights(ctx, hp, wt, tied_output, w, err)) return ctx;
    tsr_free(ctx);
    return nullptr;
}

// Find every weight of an architecture in ctx by name and check its shape.
inline bool bind_weights(tsr_context * ctx, const hparams & hp, weights & w, std::string & err) {
    const int64_t E = hp.n_embd, V = hp.n_vocab, F = hp.n_ff, G = hp.n_embd_gqa();
    bool ok = true;
    auto get = [&](const std::string & name, int64_t ne0, int64_t ne1, bool required, int64_t ne2 = 1) -> tsr_tensor * {
        if (!ok) return nullptr;
        tsr_tensor * t = tsr_get_tensor(ctx, name.c_str());
        if (!t) {
            if (required) { ok = false; err = "model file lacks tensor '" + name + "'"; }
            return nullptr;
        }
        if (t->ne[0] != ne0 || t->ne[1] != (ne1 > 0 ? ne1 : 1) || t->ne[2] != ne2 || t->ne[3] != 1) {
            ok = false;
            err = "tensor '" + name + "' has shape [" + std::to_string(t->ne[0]) + ", " + std::to_string(t->ne[1]) + ", " +
                  std::to_string(t->ne[2]) + "], expected [" + std::to_string(ne0) + ", " + std::to_string(ne1 > 0 ? ne1 : 1) +
                  (ne2 > 1 ? ", " + std::to_string(ne2) : std::string()) + "]";
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
            const int64_t Q = hp.n_embd_q();
            L.wq = get(p + "attn_q.weight", E, Q, true);
            L.wk = get(p + "attn_k.weight", E, G, true);
            L.wv = get(p + "attn_v.weight", E, G, true);
            L.bq = get(p + "attn_q.bias", Q, 0, false);  // optional, as in llama.cpp (qwen2's files have them)
            L.bk = get(p + "attn_k.bias", G, 0, false);
            L.bv = get(p + "attn_v.bias", G, 0, false);
            if (has_qk_norm(hp.a)) {
                L.q_norm = get(p + "attn_q_norm.weight", hp.head_dim(), 0, true);
                L.k_norm = get(p + "attn_k_norm.weight", hp.head_dim(), 0, true);
            }
            L.wo = get(p + "attn_output.weight", Q, E, true);
            L.ffn_norm = get(p + "ffn_norm.weight", E, 0, true);
            if (hp.is_moe()) {
                const int64_t FX = hp.ff_exp(), NX = hp.n_expert;
                L.ffn_gate_inp = get(p + "ffn_gate_inp.weight", E, NX, true);
                L.ffn_gate_exps = get(p + "ffn_gate_exps.weight", E, FX, true, NX);
                L.ffn_up_exps = get(p + "ffn_up_exps.weight", E, FX, true, NX);
                L.ffn_down_exps = get(p + "ffn_down_exps.weight", FX, E, true, NX);
            } else {
                L.ffn_gate = get(p + "ffn_gate.weight", E, F, true);
                L.ffn_up = get(p + "ffn_up.weight", E, F, true);
                L.ffn_down = get(p + "ffn_down.weight", F, E, true);
            }
        }
    }
    w.out_norm = get("output_norm.weight", E, 0, true);
    if (hp.a == arch::gpt2) w.out_norm_b = get("output_norm.bias", E, 0, true);
    w.output = get("output.weight", E, V, false);
    if (hp.a == arch::qwen2) w.output_b = get("output.bias", V, 0, false);
    if (ok && !w.output) w.output = w.tok_embd;  // tied embeddings
    return ok;
}

// The op that reads weight w in build_graph, on a stand-in activation: experts are chosen
// (mul_mat_id), a matrix is multiplied (mul_mat), a vector scales or shifts rows (mul/add:
// the same kernels, so mul stands for both).
inline tsr_tensor * weight_op(tsr_context * ctx, tsr_tensor * w) {
    if (w->ne[2] > 1) {
        tsr_tensor * x = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, w->ne[0], 1, 2);
        tsr_tensor * ids = tsr_new_tensor_2d(ctx, TSR_TYPE_I32, 1, 2);
        return x && ids ? tsr_mul_mat_id(ctx, w, x, ids) : nullptr;
    }
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, w->ne[0], 2);
    return !x ? nullptr : w->ne[1] > 1 ? tsr_mul_mat(ctx, w, x) : tsr_mul(ctx, x, w);
}

// Would `be` run the op that reads weight w in build_graph?
inline bool backend_runs_weight(tsr_backend_t be, tsr_tensor * w) {
    tsr_context * ctx = tsr_init(tsr_init_params{4 * tsr_tensor_overhead(), nullptr, true});
    if (!ctx) return false;
    tsr_tensor * op = weight_op(ctx, w);
    const bool ok = op && tsr_backend_supports_op(be, op);
    tsr_free(ctx);
    return ok;
}

// Place tensors one after another in buffers of buft (several, held by one multi-buffer,
// when they outgrow its max size). NULL + err on failure, with no tensor left placed.
inline tsr_backend_buffer_t alloc_tensors(const std::vector<tsr_tensor *> & ts, tsr_backend_buffer_type_t buft,
                                          tsr_backend_buffer_usage usage, std::string & err) {
    const size_t align = tsr_backend_buft_get_alignment(buft), max = tsr_backend_buft_get_max_size(buft);
    std::vector<tsr_backend_buffer_t> bufs;
    auto fail = [&](const std::string & what) -> tsr_backend_buffer_t {
        err = what + ": " + tsr_last_error();
        for (tsr_tensor * t : ts) { t->buffer = nullptr; t->data = nullptr; }
        for (tsr_backend_buffer_t b : bufs) tsr_backend_buffer_free(b);
        return nullptr;
    };
    for (size_t i = 0; i < ts.size();) {
        size_t j = i, size = 0;
        for (; j < ts.size(); ++j) {
            const size_t sz = TSR_PAD(tsr_backend_buft_get_alloc_size(buft, ts[j]), align);
            if (j > i && size + sz > max) break;
            size += sz;
        }
        tsr_backend_buffer_t b = tsr_backend_buft_alloc_buffer(buft, std::max<size_t>(size, align));
        if (!b) return fail(std::string("allocating ") + std::to_string(size) + " bytes of " + tsr_backend_buft_name(buft));
        bufs.push_back(b);
        tsr_tallocr ta = tsr_tallocr_new(b);
        for (size_t k = i; k < j; ++k) {
            if (!tsr_tallocr_alloc(&ta, ts[k])) return fail(std::string("placing '") + ts[k]->name + "'");
        }
        i = j;
    }
    tsr_backend_buffer_t out = bufs.size() == 1 ? bufs[0] : tsr_backend_multi_buffer_alloc_buffer(bufs.data(), bufs.size());
    if (!out) return fail("joining weight buffers");
    tsr_backend_buffer_set_usage(out, usage);
    return out;
}

// Where a model's weights go: `main` is the backend that runs the model (a GPU, or the
// CPU); next to a GPU, `cpu` holds what stays in host memory (NULL: the model makes one).
// n_gpu_layers: the last that many layers go to the GPU (-1: all; ignored on the CPU).
struct placement {
    tsr_backend_t main = nullptr;
    tsr_backend_t cpu = nullptr;
    int n_gpu_layers = -1;
    // CPU backend: the weights a CPU_REPACK buffer interleaves (Q4_0 / IQ4_NL / Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q3_K / Q2_K matrices) read
    // into one (a mapping cannot be rewritten); the others stay mapped when mapping is asked
    bool repack = false;
};

// A model: hyper-parameters, tokenizer, weights in WEIGHTS buffers.
struct model {
    hparams hp;
    tokenizer tok;
    weights w;
    tsr_gguf_context * gguf = nullptr;
    tsr_context * ctx_w = nullptr;          // tensor headers
    tsr_backend_buffer_t buf_w = nullptr;   // weights on the main backend (all of them on the CPU)
    tsr_backend_buffer_t buf_w_cpu = nullptr;  // next to a GPU: weights kept in host memory
    tsr_backend_buffer_t buf_w_repack = nullptr;  // mapped weights: those moved into a CPU_REPACK buffer
    std::vector<tsr_backend_t> backends;    // the scheduler's order: main first, the CPU last
    tsr_backend_t cpu_owned = nullptr;      // the CPU backend made for a GPU run without one
    int n_gpu_layers = 0;                   // layers [n_layer - n_gpu_layers, n_layer) on the GPU
    std::string path;
    size_t file_size = 0;
    bool mapped = false;            // buf_w is a read-only mapping of the file (tsr_gguf_map_tensors)
    std::string not_mapped_why;     // mmap was asked for and refused: why (the weights were read instead)

    model() = default;
    model(const model &) = delete;
    model & operator=(const model &) = delete;
    ~model() { release(); }
    void release() {
        tsr_backend_buffer_free(buf_w);
        tsr_backend_buffer_free(buf_w_cpu);
        tsr_backend_buffer_free(buf_w_repack);
        tsr_free(ctx_w);
        tsr_gguf_free(gguf);
        tsr_backend_free(cpu_owned);
        buf_w = nullptr;
        buf_w_cpu = nullptr;
        buf_w_repack = nullptr;
        ctx_w = nullptr;
        gguf = nullptr;
        cpu_owned = nullptr;
        backends.clear();
        n_gpu_layers = 0;
    }
    bool on_gpu() const { return backends.size() > 1; }
    bool layer_on_gpu(int il) const { return on_gpu() && il >= hp.n_layer - n_gpu_layers; }
    tsr_backend_t cpu() const { return backends.empty() ? nullptr : backends.back(); }
};

// The weights used in place from a read-only mapping of the file, when the backend is the
// CPU's and the file allows it; false (with the reason kept) leaves them to be read.
inline bool map_weights(model & m, tsr_backend_t backend) {
    if (!tsr_backend_is_cpu(backend)) {
        m.not_mapped_why = std::string("the ") + tsr_backend_name(backend) + " backend keeps weights in its own memory";
        return false;
    }
    m.buf_w = tsr_gguf_map_tensors(m.gguf, m.ctx_w, m.path.c_str());
    if (!m.buf_w) m.not_mapped_why = tsr_last_error();
    m.mapped = m.buf_w != nullptr;
    return m.mapped;
}

// The weights the GPU gets: every weight of the last n_gpu_layers layers, and the output
// norm and matrix when those cover every layer; never the token (or position) embeddings,
// which get_rows reads on the CPU like llama.cpp's input layer.
inline std::vector<tsr_tensor *> gpu_candidates(const model & m) {
    std::vector<tsr_tensor *> out;
    for (int il = 0; il < m.hp.n_layer; ++il) {
        if (!m.layer_on_gpu(il)) continue;
        const layer_weights & L = m.w.layers[(size_t) il];
        for (tsr_tensor * t : {L.attn_norm, L.attn_norm_b, L.wqkv, L.bqkv, L.wq, L.wk, L.wv, L.bq, L.bk, L.bv, L.q_norm, L.k_norm, L.wo, L.bo, L.ffn_norm,
                               L.ffn_norm_b, L.ffn_gate, L.ffn_up, L.ffn_up_b, L.ffn_down, L.ffn_down_b, L.ffn_gate_inp,
                               L.ffn_gate_exps, L.ffn_up_exps, L.ffn_down_exps})
            if (t) out.push_back(t);
    }
    if (m.n_gpu_layers == m.hp.n_layer && m.on_gpu()) {
        for (tsr_tensor * t : {m.w.out_norm, m.w.out_norm_b, m.w.output, m.w.output_b})
            if (t && t != m.w.tok_embd) out.push_back(t);
    }
    return out;
}

// Allocate every weight: all on the main backend when it is the CPU; otherwise the GPU's
// share (gpu_candidates that the GPU runs in their type) in its buffers, the rest on the CPU.
inline bool place_weights(model & m, const placement & pl, std::string & err) {
    if (tsr_backend_is_cpu(pl.main)) {
        m.backends = {pl.main};
        m.buf_w = pl.repack ? tsr_backend_alloc_ctx_tensors_from_buft(m.ctx_w, tsr_backend_cpu_repack_buffer_type())
                            : tsr_backend_alloc_ctx_tensors(m.ctx_w, pl.main);
        if (!m.buf_w) { err = std::string("allocating the weights buffer: ") + tsr_last_error(); return false; }
        tsr_backend_buffer_set_usage(m.buf_w, TSR_BUFFER_USAGE_WEIGHTS);
        return true;
    }
    tsr_backend_t cpu = pl.cpu;
    if (!cpu) {
        cpu = m.cpu_owned = tsr_backend_cpu_init();
        if (!cpu) { err = std::string("starting the CPU backend: ") + tsr_last_error(); return false; }
    }
    m.backends = {pl.main, cpu};
    m.n_gpu_layers = pl.n_gpu_layers < 0 ? m.hp.n_layer : std::min(pl.n_gpu_layers, m.hp.n_layer);
    std::vector<tsr_tensor *> gpu, host;
    for (tsr_tensor * t : gpu_candidates(m)) {
        if (backend_runs_weight(pl.main, t) && std::find(gpu.begin(), gpu.end(), t) == gpu.end()) gpu.push_back(t);
    }
    for (tsr_tensor * t = tsr_get_first_tensor(m.ctx_w); t; t = tsr_get_next_tensor(m.ctx_w, t)) {
        if (std::find(gpu.begin(), gpu.end(), t) == gpu.end()) host.push_back(t);
    }
    if (!gpu.empty() && !(m.buf_w = alloc_tensors(gpu, tsr_backend_get_default_buffer_type(pl.main), TSR_BUFFER_USAGE_WEIGHTS, err))) return false;
    if (!host.empty() && !(m.buf_w_cpu = alloc_tensors(host, tsr_backend_get_default_buffer_type(cpu), TSR_BUFFER_USAGE_WEIGHTS, err))) return false;
    return true;
}

// The tensors of ctx that a CPU_REPACK buffer interleaves.
inline std::vector<tsr_tensor *> repacked_tensors(tsr_context * ctx) {
    std::vector<tsr_tensor *> out;
    for (tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t))
        if (tsr_backend_cpu_repacks(t)) out.push_back(t);
    return out;
}

// The mapped pages wholly inside [p, p + n) let go (Linux): their copy lives elsewhere now,
// and touched file pages would otherwise stay in the process's resident set.
inline void drop_mapped_pages(const void * p, size_t n) {
#if defined(__linux__)
    const uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
    const uintptr_t lo = ((uintptr_t) p + page - 1) / page * page, hi = ((uintptr_t) p + n) / page * page;
    if (hi > lo) madvise((void *) lo, hi - lo, MADV_DONTNEED);
#else
    (void) p;
    (void) n;
#endif
}

// Mapped weights that a CPU_REPACK buffer interleaves, moved into one (copied from the
// mapping, which keeps the rest): no tensor views them, so they may be placed again.
inline bool move_mapped_to_repack(model & m, std::string & err) {
    const std::vector<tsr_tensor *> ts = repacked_tensors(m.ctx_w);
    if (ts.empty()) return true;
    tsr_backend_buffer_type_t buft = tsr_backend_cpu_repack_buffer_type();
    const size_t align = tsr_backend_buft_get_alignment(buft);
    size_t total = 0;
    for (tsr_tensor * t : ts) total += (tsr_nbytes(t) + align - 1) / align * align;
    m.buf_w_repack = tsr_backend_buft_alloc_buffer(buft, total);
    if (!m.buf_w_repack) { err = std::string("allocating the CPU_REPACK buffer: ") + tsr_last_error(); return false; }
    tsr_backend_buffer_set_usage(m.buf_w_repack, TSR_BUFFER_USAGE_WEIGHTS);
    char * p = (char *) tsr_backend_buffer_get_base(m.buf_w_repack);
    for (tsr_tensor * t : ts) {
        const void * mapped = t->data;
        t->buffer = nullptr;
        t->data = nullptr;
        if (!tsr_backend_tensor_alloc(m.buf_w_repack, t, p) || !tsr_backend_tensor_set(t, mapped, 0, tsr_nbytes(t))) {
            err = std::string("weight '") + t->name + "' into CPU_REPACK: " + tsr_last_error();
            return false;
        }
        drop_mapped_pages(mapped, tsr_nbytes(t));
        p += (tsr_nbytes(t) + align - 1) / align * align;
    }
    return true;
}

// Weights written through tensor->data (a benchmark's fill) passed to their CPU_REPACK
// buffer as if set, so it packs them.
inline bool weights_written_in_place(tsr_context * ctx, std::string & err) {
    for (tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        if (!t->buffer || std::string(tsr_backend_buffer_name(t->buffer)) != "CPU_REPACK") continue;
        if (!tsr_backend_tensor_set(t, t->data, 0, tsr_nbytes(t))) {
            err = std::string("weight '") + t->name + "': " + tsr_last_error();
            return false;
        }
    }
    return true;
}

// Load a GGUF model: metadata, tokenizer, weights placed as pl says, tensor data; with
// use_mmap on the CPU backend the weights are mapped in place when map_weights can, else read.
inline bool load_model(const char * path, const placement & pl, model & m, tsr_gguf_progress_cb progress, void * user,
                       std::string & err, bool use_mmap = false) {
    m.release();
    m.mapped = false;
    m.not_mapped_why.clear();
    m.path = path;
    tsr_gguf_init_params ip = {true, &m.ctx_w};
    m.gguf = tsr_gguf_init_from_file(path, ip);
    if (!m.gguf) { err = tsr_last_error(); return false; }
    m.file_size = tsr_gguf_get_data_offset(m.gguf) + tsr_gguf_get_data_size(m.gguf);
    if (!hparams_from_gguf(m.gguf, m.hp, err)) return false;
    if (!m.tok.load(m.gguf, err)) return false;
    if (m.hp.n_vocab != m.tok.n_vocab()) { err = "vocabulary size mismatch"; return false; }
    if (!bind_weights(m.ctx_w, m.hp, m.w, err)) return false;
    if (use_mmap && map_weights(m, pl.main)) {  // map_weights says why not (e.g. a GPU backend)
        m.backends = {pl.main};
        if (pl.repack && !move_mapped_to_repack(m, err)) return false;
        if (progress) progress(tsr_gguf_get_data_size(m.gguf), tsr_gguf_get_data_size(m.gguf), user);
        return true;
    }
    if (!place_weights(m, pl, err)) return false;
    if (!tsr_gguf_load_tensors(m.gguf, m.ctx_w, path, progress, user)) { err = tsr_last_error(); return false; }
    return true;
}

// Load a GGUF model onto one backend (a GPU gets every layer, and a CPU backend of its own
// for the token embeddings and the ops it lacks).
inline bool load_model(const char * path, tsr_backend_t backend, model & m, tsr_gguf_progress_cb progress, void * user,
                       std::string & err, bool use_mmap = false) {
    placement pl;
    pl.main = backend;
    return load_model(path, pl, m, progress, user, err, use_mmap);
}

} // namespace trun
