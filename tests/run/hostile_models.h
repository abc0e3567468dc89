// hostile_models.h - model files with hostile metadata, each made from a valid model by
// editing its keys: the loader tests (model_test.cpp) assert each one's error, and the
// model fuzzer's seed corpus (tests/fuzz/make_model_corpus.cpp) holds them.
#pragma once

#include "random_model.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace trun_test {

// The valid model the hostile ones start from: 2 layers of n_embd (a multiple of 4) in 4
// heads, grouped-query attention (2 KV heads) but for gpt2, rotary embedding over each head;
// qwen3's heads are twice n_embd / 4 wide (an explicit attention.key_length, as Qwen3-0.6B's).
inline trun::hparams small_hparams(trun::arch a, int n_embd) {
    const bool gpt2 = a == trun::arch::gpt2;
    trun::hparams hp;
    hp.a = a;
    hp.n_ctx = 64;
    hp.n_embd = n_embd;
    hp.n_layer = 2;
    hp.n_head = 4;
    hp.n_head_kv = gpt2 ? 4 : 2;
    hp.n_ff = gpt2 ? n_embd * 2 : n_embd * 3 / 2;
    if (trun::has_qk_norm(a)) hp.n_embd_head = n_embd / 2;
    if (a != trun::arch::gpt2 && a != trun::arch::llama) hp.rope_base = 1000000.0f;  // theirs, not llama's default
    if (a == trun::arch::qwen3moe) {  // experts narrower than its feed_forward_length, as Qwen3-30B-A3B's
        hp.n_expert = 4;
        hp.n_expert_used = 2;
        hp.n_ff_exp = 32;
    }
    hp.n_rot = hp.head_dim();
    return hp;
}

using edit_fn = std::function<bool(tsr_gguf_context * g)>;

struct hostile_case {
    std::string name;    // a file name stem
    edit_fn edit;        // what it changes in the valid model's metadata
    std::string error;   // a part of the error the loader must give
};

// Write a copy of the model file `src` to `dst`, its metadata edited by `edit`.
inline bool write_edited_model(const std::string & src, const std::string & dst, const edit_fn & edit, std::string & err) {
    tsr_context * ctx = nullptr;
    tsr_gguf_context * g = tsr_gguf_init_from_file(src.c_str(), tsr_gguf_init_params{false, &ctx});
    tsr_gguf_context * w = g ? tsr_gguf_init_empty() : nullptr;
    bool ok = w && tsr_gguf_set_kv(w, g) && edit(w);
    for (tsr_tensor * t = ok ? tsr_get_first_tensor(ctx) : nullptr; ok && t; t = tsr_get_next_tensor(ctx, t)) ok = tsr_gguf_add_tensor(w, t);
    ok = ok && tsr_gguf_write_to_file(w, dst.c_str(), false);
    if (!ok) err = tsr_last_error();
    tsr_gguf_free(w);
    tsr_gguf_free(g);
    tsr_free(ctx);
    return ok;
}

// Replace the vocabulary by its first n entries (n may be 0).
inline bool truncate_vocab(tsr_gguf_context * g, size_t n) {
    const int64_t k = tsr_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (k < 0 || tsr_gguf_get_arr_n(g, k) < n) return false;
    std::vector<std::string> kept;
    for (size_t i = 0; i < n; ++i) kept.push_back(tsr_gguf_get_arr_str(g, k, i));
    std::vector<const char *> p;
    for (const std::string & s : kept) p.push_back(s.c_str());
    return tsr_gguf_set_arr_str(g, "tokenizer.ggml.tokens", p.data(), p.size());
}

// The hostile variants of a valid model with hyper-parameters hp (n_embd > 2, n_vocab > 1).
inline std::vector<hostile_case> hostile_cases(const trun::hparams & hp) {
    const std::string an = trun::arch_name(hp.a), k_layers = an + ".block_count", k_embd = an + ".embedding_length";
    const std::string k_heads = an + ".attention.head_count", k_kv = an + ".attention.head_count_kv";
    const std::string k_ctx = an + ".context_length", k_ff = an + ".feed_forward_length";
    auto u32 = [](const std::string & key, uint32_t v) -> edit_fn { return [=](tsr_gguf_context * g) { return tsr_gguf_set_val_u32(g, key.c_str(), v); }; };
    auto u64 = [](const std::string & key, uint64_t v) -> edit_fn { return [=](tsr_gguf_context * g) { return tsr_gguf_set_val_u64(g, key.c_str(), v); }; };
    auto i64 = [](const std::string & key, int64_t v) -> edit_fn { return [=](tsr_gguf_context * g) { return tsr_gguf_set_val_i64(g, key.c_str(), v); }; };
    const std::string n = std::to_string(hp.n_layer), vocab = std::to_string(hp.n_vocab);
    std::vector<hostile_case> c = {
        {"layers_2p31m1", u32(k_layers, 2147483647u), k_layers + " = 2147483647 is out of range [1, 1024]"},
        {"layers_20M", u32(k_layers, 20000000u), k_layers + " = 20000000 is out of range [1, 1024]"},
        {"layers_u64_2p32p1", u64(k_layers, (1ull << 32) + 1), k_layers + " = 4294967297 is out of range [1, 1024]"},
        {"layers_u64_max", u64(k_layers, UINT64_MAX), k_layers + " = 18446744073709551615 is out of range [1, 1024]"},
        {"layers_one_more", u32(k_layers, (uint32_t) hp.n_layer + 1),
         k_layers + " = " + std::to_string(hp.n_layer + 1) + ", but the file's tensors hold " + n + " layers"},
        {"layers_one", u32(k_layers, 1), k_layers + " = 1, but the file's tensors hold " + n + " layers"},
        {"layers_str", [=](tsr_gguf_context * g) { return tsr_gguf_set_val_str(g, k_layers.c_str(), "12"); },
         k_layers + " has type str, expected an integer"},
        {"embd_negative", i64(k_embd, -5), k_embd + " = -5 is out of range [1, 1048576]"},
        {"embd_doubled", u32(k_embd, (uint32_t) hp.n_embd * 2),
         k_embd + " = " + std::to_string(hp.n_embd * 2) + " contradicts tensor 'token_embd.weight': its ne[0] is " + std::to_string(hp.n_embd)},
        {"heads_beyond_embd", u32(k_heads, (uint32_t) hp.n_embd + 1), k_heads + " = " + std::to_string(hp.n_embd + 1) + " is out of range [1, "},
        {"kv_heads_beyond_heads", u32(k_kv, (uint32_t) hp.n_head + 1),
         k_kv + " = " + std::to_string(hp.n_head + 1) + " is out of range [0, " + std::to_string(hp.n_head) + "]"},
        {"ctx_u64_2p63", u64(k_ctx, (1ull << 63) + 5), k_ctx + " = 9223372036854775813 is out of range [1, 2147483647]"},
        {"ctx_zero", u32(k_ctx, 0), k_ctx + " = 0 is out of range [1, 2147483647]"},
        {"vocab_one_short", [=](tsr_gguf_context * g) { return truncate_vocab(g, (size_t) hp.n_vocab - 1); },
         "the vocabulary size (entries of tokenizer.ggml.tokens) = " + std::to_string(hp.n_vocab - 1) +
             " contradicts tensor 'token_embd.weight': its ne[1] is " + vocab},
        {"vocab_empty", [=](tsr_gguf_context * g) { return truncate_vocab(g, 0); },
         "the vocabulary tokenizer.ggml.tokens has 0 entries"},
    };
    if (!hp.is_moe()) {
        c.push_back({"ff_contradicts", u32(k_ff, (uint32_t) hp.n_ff + 1),
                     k_ff + " = " + std::to_string(hp.n_ff + 1) + " contradicts tensor 'blk.0.ffn_up.weight'"});
    } else {
        const std::string k_count = an + ".expert_count", k_used = an + ".expert_used_count";
        const std::string k_ff_exp = an + (hp.n_ff_exp > 0 ? ".expert_feed_forward_length" : ".feed_forward_length");
        const std::string nx = std::to_string(hp.n_expert);
        c.push_back({"experts_used_beyond_count", u32(k_used, (uint32_t) hp.n_expert + 1),
                     k_used + " = " + std::to_string(hp.n_expert + 1) + " is out of range [1, " + nx + "]"});
        c.push_back({"experts_used_zero", u32(k_used, 0), k_used + " = 0 is out of range [1, " + nx + "]"});
        c.push_back({"experts_2p31", u32(k_count, 1u << 31), k_count + " = 2147483648 is out of range ["});
        c.push_back({"experts_one_more", u32(k_count, (uint32_t) hp.n_expert + 1),
                     k_count + " = " + std::to_string(hp.n_expert + 1) + " contradicts tensor 'blk.0.ffn_gate_inp.weight'"});
        c.push_back({"experts_ff_contradicts", u32(k_ff_exp, (uint32_t) hp.ff_exp() + 1),
                     k_ff_exp + " = " + std::to_string(hp.ff_exp() + 1) + " contradicts tensor 'blk.0.ffn_up_exps.weight'"});
    }
    if (hp.n_embd_head == 0) {
        c.push_back({"heads_not_dividing", u32(k_heads, (uint32_t) hp.n_embd - 1),
                     k_heads + " = " + std::to_string(hp.n_embd - 1) + " does not divide " + k_embd + " = " + std::to_string(hp.n_embd)});
    } else {  // heads of an explicit size: their number needs not divide n_embd, but must match the tensors
        const std::string k_key = an + ".attention.key_length", k_val = an + ".attention.value_length";
        const std::string hd = std::to_string(hp.head_dim());
        c.push_back({"heads_doubled", u32(k_heads, (uint32_t) hp.n_head * 2),
                     k_heads + " * the head dimension (" + std::to_string(hp.n_head * 2) + " * " + hd + ") = " +
                         std::to_string(hp.n_head * 2 * hp.head_dim()) + " contradicts tensor 'blk.0.attn_q.weight'"});
        c.push_back({"key_length_2p20", [=](tsr_gguf_context * g) {
                         return tsr_gguf_set_val_u32(g, k_key.c_str(), 1u << 20) && tsr_gguf_set_val_u32(g, k_val.c_str(), 1u << 20);
                     },
                     k_key + " = 1048576 times " + k_heads + " = " + std::to_string(hp.n_head) + " is out of range [1, 1048576]"});
        c.push_back({"key_length_u64_2p32", u64(k_key, 1ull << 32), k_key + " = 4294967296 is out of range [1, 1048576]"});
        c.push_back({"value_length_differs", u32(k_val, (uint32_t) hp.head_dim() / 2),
                     k_val + " = " + std::to_string(hp.head_dim() / 2) + " differs from the key length " + hd});
        c.push_back({"key_length_halved", [=](tsr_gguf_context * g) {
                         const uint32_t half = (uint32_t) hp.head_dim() / 2;
                         return tsr_gguf_set_val_u32(g, k_key.c_str(), half) && tsr_gguf_set_val_u32(g, k_val.c_str(), half) &&
                                tsr_gguf_set_val_u32(g, (an + ".rope.dimension_count").c_str(), half);
                     },
                     "contradicts tensor 'blk.0.attn_k.weight'"});
    }
    if (hp.a != trun::arch::gpt2) {
        const std::string k_rot = an + ".rope.dimension_count", hd = std::to_string(hp.head_dim());
        const std::string k_eps = an + ".attention.layer_norm_rms_epsilon";
        c.push_back({"rope_beyond_head", u32(k_rot, (uint32_t) hp.head_dim() + 2),
                     k_rot + " = " + std::to_string(hp.head_dim() + 2) + " is out of range [1, " + hd + "]"});
        c.push_back({"rope_odd", u32(k_rot, (uint32_t) hp.head_dim() - 1), k_rot + " = " + std::to_string(hp.head_dim() - 1) + " is odd"});
        if (hp.a != trun::arch::llama) {
            c.push_back({"rope_partial", u32(k_rot, (uint32_t) hp.head_dim() - 2),
                         k_rot + " = " + std::to_string(hp.head_dim() - 2) + " differs from the head dimension " + hd});
        }
        c.push_back({"eps_nan", [=](tsr_gguf_context * g) { return tsr_gguf_set_val_f32(g, k_eps.c_str(), NAN); }, k_eps + " = nan is out of range [0, 1]"});
    }
    return c;
}

} // namespace trun_test
