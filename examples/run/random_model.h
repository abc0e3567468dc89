// random_model.h - models with seeded random weights: the runner's embedded demo, the
// tests' tiny models and the benchmark's GPT-2-small / 1B-LLaMA-sized models.
//
// Every tensor's values depend only on (seed, tensor name), so the same model in F32,
// F16, Q8_0, Q4_K, a Q4_K_M mix, ... holds the same underlying numbers, rounded to the type.
#pragma once

#include "model.h"
#include "sampling.h"

#include <cstring>
#include <string>
#include <vector>

namespace trun {

inline uint64_t hash_name(const char * s) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (; *s; ++s) h = (h ^ (uint8_t) *s) * 1099511628211ull;
    return h;
}

// Scale of a tensor's random values by its role (keeps activations and logits moderate).
inline void random_scale(const tsr_tensor * t, float & scale, float & offset) {
    const std::string n = t->name;
    offset = 0.0f;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0) scale = 0.1f;
    else if (n.find("norm.weight") != std::string::npos) { scale = 0.1f; offset = 1.0f; }
    else if (n == "token_embd.weight") scale = 0.5f;
    else if (n == "position_embd.weight") scale = 0.1f;
    else scale = std::sqrt(3.0f / (float) t->ne[0]);
}

// The F32 values of row `row` of a tensor (what fill_random rounds to the tensor's type).
inline void random_row(const tsr_tensor * t, uint64_t seed, int64_t row, float * out) {
    float scale, offset;
    random_scale(t, scale, offset);
    rng r(seed ^ hash_name(t->name) ^ ((uint64_t) row * 0x9E3779B97F4A7C15ull));
    for (int64_t i = 0; i < t->ne[0]; ++i) out[i] = offset + scale * r.symmetric();
}

// Fill a tensor with its random values. Host tensors are written in place, others
// through a staging chunk and tsr_backend_tensor_set.
inline bool fill_random(tsr_tensor * t, uint64_t seed, std::string & err) {
    const int64_t ne0 = t->ne[0], nrows = tsr_nrows(t);
    const size_t row_bytes = tsr_row_size(t->type, ne0);
    const int64_t chunk_rows = std::max<int64_t>(1, (int64_t) ((1u << 20) / std::max<size_t>(1, (size_t) ne0 * 4)));
    std::vector<float> f((size_t) (ne0 * std::min(chunk_rows, nrows)));
    const bool host = !t->buffer || tsr_backend_buffer_is_host(t->buffer);
    std::vector<uint8_t> stage(host ? 0 : row_bytes * (size_t) std::min(chunk_rows, nrows));
    for (int64_t r0 = 0; r0 < nrows; r0 += chunk_rows) {
        const int64_t nr = std::min(chunk_rows, nrows - r0);
        for (int64_t r = 0; r < nr; ++r) random_row(t, seed, r0 + r, f.data() + r * ne0);
        uint8_t * dst = host ? (uint8_t *) t->data + row_bytes * (size_t) r0 : stage.data();
        bool ok;
        if (tsr_is_quantized(t->type)) {
            // tsr_quantize_chunk writes at row `start` of dst: give it the chunk's base
            ok = tsr_quantize_chunk(t->type, f.data(), dst, 0, nr, ne0, nullptr) == row_bytes * (size_t) nr;
        } else {
            ok = tsr_from_float_row(t->type, f.data(), dst, ne0 * nr);
        }
        if (!ok) { err = std::string("filling '") + t->name + "': " + tsr_last_error(); return false; }
        if (!host && !tsr_backend_tensor_set(t, dst, row_bytes * (size_t) r0, row_bytes * (size_t) nr)) {
            err = std::string("uploading '") + t->name + "': " + tsr_last_error();
            return false;
        }
    }
    return true;
}

inline bool fill_weights(tsr_context * ctx, uint64_t seed, std::string & err) {
    for (tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        if (!fill_random(t, seed, err)) return false;
    }
    return true;
}

// A small LLaMA-style vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces with
// scores (longer pieces score higher), built from the built-in text's words.
inline void build_builtin_spm_vocab(int n_pieces, tokenizer & tok) {
    tok = tokenizer();
    tok.kind = tok_kind::spm;
    auto add = [&](const std::string & s, float score, int type) {
        for (const std::string & t : tok.tokens) if (t == s) return;
        tok.tokens.push_back(s);
        tok.scores.push_back(score);
        tok.types.push_back(type);
    };
    add("<unk>", 0.0f, TOK_UNKNOWN);
    add("<s>", 0.0f, TOK_CONTROL);
    add("</s>", 0.0f, TOK_CONTROL);
    for (int b = 0; b < 256; ++b) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        add(name, 0.0f, TOK_BYTE);
    }
    // single characters of the text, then every prefix of its words (with the space mark)
    const std::string text = builtin_text();
    for (char c : text) {
        if ((unsigned char) c < 0x80 && c != ' ') add(std::string(1, c), -10.0f, TOK_NORMAL);
    }
    add("\xE2\x96\x81", -9.0f, TOK_NORMAL);
    std::string word;
    for (size_t i = 0; i <= text.size() && (int) tok.tokens.size() < 259 + n_pieces; ++i) {
        const char c = i < text.size() ? text[i] : ' ';
        if (c == ' ') {
            const std::string w = "\xE2\x96\x81" + word;
            for (size_t k = 4; k <= w.size(); ++k) add(w.substr(0, k), -20.0f / (float) k, TOK_NORMAL);  // longer: higher score
            word.clear();
        } else {
            word += c;
        }
    }
    tok.unk = 0;
    tok.bos = 1;
    tok.eos = 2;
    tok.add_bos = true;
    tok.add_space_prefix = true;
    tok.finish();
}

// A vocabulary padded with unused tokens to n_vocab (a real model's size), so the embedding
// and output matrices of a random model written with it have their real size.
inline void pad_vocab(tokenizer & tok, int n_vocab) {
    for (int i = 0; tok.n_vocab() < n_vocab; ++i) {
        tok.tokens.push_back("<unused" + std::to_string(i) + ">");
        tok.scores.push_back(-1000.0f);
        tok.types.push_back(TOK_UNUSED);
    }
    tok.finish();
}

// Write a model with random weights to a GGUF file. The weights are built in a host
// context first; pass keep_ctx to receive it (the test's reference reads it).
inline bool write_random_model(const char * path, const hparams & hp_in, const tokenizer & tok, const std::vector<std::string> & merges,
                               const weight_types & wtype, bool tied_output, uint64_t seed, std::string & err,
                               tsr_context ** keep_ctx = nullptr) {
    hparams hp = hp_in;
    hp.n_vocab = tok.n_vocab();
    weights w;
    size_t mem = 0;
    {   // exact data size: the headers in a scratch no_alloc context first
        tsr_context * probe = new_weight_headers(hp, wtype, tied_output, w, err);
        if (!probe) return false;
        mem = tsr_get_mem_size(probe);
        for (tsr_tensor * t = tsr_get_first_tensor(probe); t; t = tsr_get_next_tensor(probe, t)) mem += TSR_PAD(tsr_nbytes(t), TSR_MEM_ALIGN);
        tsr_free(probe);
    }
    tsr_context * ctx = tsr_init(tsr_init_params{mem, nullptr, false});
    if (!ctx) { err = tsr_last_error(); return false; }
    bool ok = create_weights(ctx, hp, wtype, tied_output, w, err) && fill_weights(ctx, seed, err);
    tsr_gguf_context * g = ok ? tsr_gguf_init_empty() : nullptr;
    if (ok && !g) { err = tsr_last_error(); ok = false; }
    if (ok) {
        ok = tsr_gguf_set_val_str(g, "general.name", "tessera random model") && hparams_to_gguf(g, hp) && tok.save(g, merges) &&
             tsr_gguf_set_val_u64(g, "tessera.random_seed", seed);
        for (tsr_tensor * t = tsr_get_first_tensor(ctx); ok && t; t = tsr_get_next_tensor(ctx, t)) ok = tsr_gguf_add_tensor(g, t);
        ok = ok && tsr_gguf_write_to_file(g, path, false);
        if (!ok && err.empty()) err = tsr_last_error();
    }
    tsr_gguf_free(g);
    if (ok && keep_ctx) *keep_ctx = ctx;
    else tsr_free(ctx);
    return ok;
}

// The runner's embedded demo model: GPT-2 architecture, 4 layers, 256 wide, the
// built-in byte-level BPE vocabulary.
// TinyLlama-1.1B's shapes (the benchmarks' 1.1B LLaMA; n_vocab is the 32000 of its vocabulary).
inline hparams tinyllama_1b_hparams() {
    hparams hp;
    hp.a = arch::llama;
    hp.n_vocab = 32000;
    hp.n_ctx = 2048;
    hp.n_embd = 2048;
    hp.n_layer = 22;
    hp.n_head = 32;
    hp.n_head_kv = 4;
    hp.n_ff = 5632;
    hp.n_rot = 64;
    hp.eps = 1e-5f;
    return hp;
}

inline hparams demo_hparams() {
    hparams hp;
    hp.a = arch::gpt2;
    hp.n_ctx = 256;
    hp.n_embd = 256;
    hp.n_layer = 4;
    hp.n_head = 4;
    hp.n_head_kv = 4;
    hp.n_ff = 1024;
    hp.eps = 1e-5f;
    return hp;
}

// Build a model with random weights directly in a backend's buffer (no file): the
// benchmark's path. The tokenizer is left empty.
inline bool init_random_model(model & m, const hparams & hp, const weight_types & wtype, bool tied_output, uint64_t seed, tsr_backend_t backend,
                              std::string & err) {
    m.release();
    m.hp = hp;
    m.ctx_w = new_weight_headers(hp, wtype, tied_output, m.w, err);
    if (!m.ctx_w) return false;
    placement pl;
    pl.main = backend;
    return place_weights(m, pl, err) && fill_weights(m.ctx_w, seed, err);
}

} // namespace trun
