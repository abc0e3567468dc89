// tokenizer.h - tokenizers from GGUF metadata (tokenizer.ggml.*), as llama.cpp reads them.
//
//   gpt2  : GPT-2 byte-level BPE. Bytes map to printable code points (bytes_to_unicode),
//           text is pre-split with GPT-2's pattern, then merges apply by rank.
//   llama : SentencePiece-style BPE. Spaces become U+2581 (with a leading one when
//           add_space_prefix), UTF-8 characters merge by highest score while the merged
//           string is in the vocabulary; leftovers fall back to <0xXX> byte tokens.
//
// Pre-splitting approximates \p{L} / \p{N} without Unicode tables: ASCII letters and every
// non-ASCII code point that is not a space count as letters, ASCII digits as numbers.
// That matches GPT-2 exactly for ASCII text.
#pragma once

#include "tessera/gguf.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace trun {

enum class tok_kind { gpt2, spm };

// llama.cpp's token types
enum tok_type { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

// ---- UTF-8 helpers -----------------------------------------------------------------------
inline size_t utf8_len(unsigned char c) {
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) return 2;
    if ((c & 0xF0) == 0xE0) return 3;
    if ((c & 0xF8) == 0xF0) return 4;
    return 1;  // invalid lead byte: treat as one byte
}
inline std::string cp_to_utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) s += (char) cp;
    else if (cp < 0x800) { s += (char) (0xC0 | (cp >> 6)); s += (char) (0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { s += (char) (0xE0 | (cp >> 12)); s += (char) (0x80 | ((cp >> 6) & 0x3F)); s += (char) (0x80 | (cp & 0x3F)); }
    else { s += (char) (0xF0 | (cp >> 18)); s += (char) (0x80 | ((cp >> 12) & 0x3F)); s += (char) (0x80 | ((cp >> 6) & 0x3F)); s += (char) (0x80 | (cp & 0x3F)); }
    return s;
}
// Decode text into code points; invalid sequences decode byte by byte as U+FFFD-free raw
// values (0xDC00 + byte) so that nothing is lost.
inline std::vector<uint32_t> utf8_decode(const std::string & s, std::vector<size_t> * starts = nullptr) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = (unsigned char) s[i];
        size_t n = utf8_len(c);
        uint32_t cp = 0;
        bool ok = i + n <= s.size() && (n > 1 || c < 0x80);
        if (ok) {
            cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
            for (size_t k = 1; k < n; ++k) {
                const unsigned char cc = (unsigned char) s[i + k];
                if ((cc & 0xC0) != 0x80) { ok = false; break; }
                cp = (cp << 6) | (cc & 0x3F);
            }
        }
        if (!ok) { cp = 0xDC00 + c; n = 1; }
        if (starts) starts->push_back(i);
        out.push_back(cp);
        i += n;
    }
    return out;
}

// GPT-2's bytes_to_unicode table: printable bytes map to themselves, the rest to 256+k.
inline const std::vector<uint32_t> & byte_to_cp() {
    static const std::vector<uint32_t> table = [] {
        std::vector<uint32_t> t(256);
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            t[b] = keep ? (uint32_t) b : (uint32_t) (256 + n++);
        }
        return t;
    }();
    return table;
}
inline std::string byte_to_token_str(uint8_t b) { return cp_to_utf8(byte_to_cp()[b]); }

// ---- GPT-2 pre-tokenizer ------------------------------------------------------------------
inline bool cp_is_space(uint32_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x85 || c == 0xA0 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
inline bool cp_is_digit(uint32_t c) { return c >= '0' && c <= '9'; }
inline bool cp_is_letter(uint32_t c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && !cp_is_space(c) && !(c >= 0xDC80 && c <= 0xDCFF));
}
inline int cp_class(uint32_t c) { return cp_is_space(c) ? 0 : cp_is_letter(c) ? 1 : cp_is_digit(c) ? 2 : 3; }

// Splits like 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline std::vector<std::string> gpt2_pretokenize(const std::string & text) {
    std::vector<size_t> st;
    const std::vector<uint32_t> cp = utf8_decode(text, &st);
    const size_t n = cp.size();
    auto byte_at = [&](size_t i) { return i < n ? st[i] : text.size(); };
    std::vector<std::string> out;
    size_t i = 0;
    while (i < n) {
        size_t end = i;
        if (cp[i] == '\'' && i + 1 < n) {
            const uint32_t a = cp[i + 1], b = i + 2 < n ? cp[i + 2] : 0;
            if (a == 's' || a == 't' || a == 'm' || a == 'd') end = i + 2;
            else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) end = i + 3;
        }
        if (end == i) {
            size_t j = i;
            if (cp[j] == ' ' && j + 1 < n && !cp_is_space(cp[j + 1])) ++j;
            const int cls = cp_class(cp[j]);
            if (cls != 0) {
                end = j + 1;
                while (end < n && cp_class(cp[end]) == cls) ++end;
            } else {
                size_t k = i;
                while (k < n && cp_is_space(cp[k])) ++k;
                end = (k < n && k - i > 1) ? k - 1 : k;
            }
        }
        out.push_back(text.substr(byte_at(i), byte_at(end) - byte_at(i)));
        i = end;
    }
    return out;
}

// ---- the tokenizer ----------------------------------------------------------------------------
struct tokenizer {
    tok_kind kind = tok_kind::gpt2;
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    std::unordered_map<std::string, int32_t> id_of;
    std::unordered_map<std::string, int32_t> merge_rank;  // "a b" -> rank (gpt2)
    int32_t bos = -1, eos = -1, unk = -1;
    bool add_bos = false;
    bool add_space_prefix = true;
    int32_t byte_tok[256];  // spm: <0xXX> tokens (-1 if absent)

    int32_t n_vocab() const { return (int32_t) tokens.size(); }

    // Build the lookup tables after tokens/scores/types/merges are filled.
    void finish() {
        id_of.clear();
        for (size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], (int32_t) i);
        for (int b = 0; b < 256; ++b) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            auto it = id_of.find(name);
            byte_tok[b] = it == id_of.end() ? -1 : it->second;
        }
    }

    void set_merges(const std::vector<std::string> & merges) {
        merge_rank.clear();
        for (size_t i = 0; i < merges.size(); ++i) merge_rank.emplace(merges[i], (int32_t) i);
    }

    // Read tokenizer.ggml.* metadata. false + err on missing or inconsistent data.
    bool load(const tsr_gguf_context * g, std::string & err) {
        const int64_t k_model = tsr_gguf_find_key(g, "tokenizer.ggml.model");
        const int64_t k_tokens = tsr_gguf_find_key(g, "tokenizer.ggml.tokens");
        if (k_model < 0 || tsr_gguf_get_kv_type(g, k_model) != TSR_GGUF_TYPE_STRING) { err = "missing tokenizer.ggml.model"; return false; }
        if (k_tokens < 0 || tsr_gguf_get_kv_type(g, k_tokens) != TSR_GGUF_TYPE_ARRAY ||
            tsr_gguf_get_arr_type(g, k_tokens) != TSR_GGUF_TYPE_STRING) { err = "missing tokenizer.ggml.tokens"; return false; }
        const std::string model = tsr_gguf_get_val_str(g, k_model);
        if (model == "gpt2") kind = tok_kind::gpt2;
        else if (model == "llama") kind = tok_kind::spm;
        else { err = "unsupported tokenizer.ggml.model '" + model + "' (supported: gpt2, llama)"; return false; }
        const size_t n = tsr_gguf_get_arr_n(g, k_tokens);
        // every id the runner makes (BOS, the fallback prompt token, samples) indexes the
        // vocabulary, so there must be one
        if (n == 0) { err = "tokenizer.ggml.tokens is empty: the vocabulary needs at least one token"; return false; }
        tokens.resize(n);
        for (size_t i = 0; i < n; ++i) tokens[i] = tsr_gguf_get_arr_str(g, k_tokens, i);
        scores.assign(n, 0.0f);
        types.assign(n, TOK_NORMAL);
        const int64_t k_scores = tsr_gguf_find_key(g, "tokenizer.ggml.scores");
        if (k_scores >= 0 && tsr_gguf_get_kv_type(g, k_scores) == TSR_GGUF_TYPE_ARRAY &&
            tsr_gguf_get_arr_type(g, k_scores) == TSR_GGUF_TYPE_FLOAT32 && tsr_gguf_get_arr_n(g, k_scores) == n) {
            memcpy(scores.data(), tsr_gguf_get_arr_data(g, k_scores), n * sizeof(float));
        }
        const int64_t k_types = tsr_gguf_find_key(g, "tokenizer.ggml.token_type");
        if (k_types >= 0 && tsr_gguf_get_kv_type(g, k_types) == TSR_GGUF_TYPE_ARRAY &&
            tsr_gguf_get_arr_type(g, k_types) == TSR_GGUF_TYPE_INT32 && tsr_gguf_get_arr_n(g, k_types) == n) {
            memcpy(types.data(), tsr_gguf_get_arr_data(g, k_types), n * sizeof(int32_t));
        }
        std::vector<std::string> merges;
        const int64_t k_merges = tsr_gguf_find_key(g, "tokenizer.ggml.merges");
        if (k_merges >= 0 && tsr_gguf_get_kv_type(g, k_merges) == TSR_GGUF_TYPE_ARRAY &&
            tsr_gguf_get_arr_type(g, k_merges) == TSR_GGUF_TYPE_STRING) {
            const size_t nm = tsr_gguf_get_arr_n(g, k_merges);
            merges.resize(nm);
            for (size_t i = 0; i < nm; ++i) merges[i] = tsr_gguf_get_arr_str(g, k_merges, i);
        } else if (kind == tok_kind::gpt2) {
            err = "gpt2 tokenizer without tokenizer.ggml.merges";
            return false;
        }
        set_merges(merges);
        auto get_id = [&](const char * key, int32_t def) {
            const int64_t k = tsr_gguf_find_key(g, key);
            if (k < 0) return def;
            const tsr_gguf_type t = tsr_gguf_get_kv_type(g, k);
            int64_t v = t == TSR_GGUF_TYPE_UINT32 ? (int64_t) tsr_gguf_get_val_u32(g, k)
                      : t == TSR_GGUF_TYPE_INT32  ? (int64_t) tsr_gguf_get_val_i32(g, k) : (int64_t) def;
            return v >= 0 && v < (int64_t) n ? (int32_t) v : def;
        };
        auto get_bool = [&](const char * key, bool def) {
            const int64_t k = tsr_gguf_find_key(g, key);
            return k >= 0 && tsr_gguf_get_kv_type(g, k) == TSR_GGUF_TYPE_BOOL ? tsr_gguf_get_val_bool(g, k) : def;
        };
        const bool spm = kind == tok_kind::spm;
        bos = get_id("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
        eos = get_id("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
        unk = get_id("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
        if (bos >= (int32_t) n) bos = -1;
        if (eos >= (int32_t) n) eos = -1;
        if (unk >= (int32_t) n) unk = -1;
        add_bos = get_bool("tokenizer.ggml.add_bos_token", spm) && bos >= 0;
        add_space_prefix = get_bool("tokenizer.ggml.add_space_prefix", true);
        finish();
        return true;
    }

    // Write this tokenizer's metadata (used by the random-model writer and tests).
    bool save(tsr_gguf_context * g, const std::vector<std::string> & merges) const {
        std::vector<const char *> p(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) p[i] = tokens[i].c_str();
        bool ok = tsr_gguf_set_val_str(g, "tokenizer.ggml.model", kind == tok_kind::gpt2 ? "gpt2" : "llama");
        ok = ok && tsr_gguf_set_arr_str(g, "tokenizer.ggml.tokens", p.data(), p.size());
        ok = ok && tsr_gguf_set_arr_data(g, "tokenizer.ggml.token_type", TSR_GGUF_TYPE_INT32, types.data(), types.size());
        if (kind == tok_kind::spm) ok = ok && tsr_gguf_set_arr_data(g, "tokenizer.ggml.scores", TSR_GGUF_TYPE_FLOAT32, scores.data(), scores.size());
        if (!merges.empty()) {
            std::vector<const char *> m(merges.size());
            for (size_t i = 0; i < merges.size(); ++i) m[i] = merges[i].c_str();
            ok = ok && tsr_gguf_set_arr_str(g, "tokenizer.ggml.merges", m.data(), m.size());
        }
        if (bos >= 0) ok = ok && tsr_gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t) bos);
        if (eos >= 0) ok = ok && tsr_gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t) eos);
        if (unk >= 0) ok = ok && tsr_gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", (uint32_t) unk);
        ok = ok && tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", add_bos);
        if (kind == tok_kind::spm) ok = ok && tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", add_space_prefix);
        return ok;
    }

    int32_t lookup(const std::string & s) const {
        auto it = id_of.find(s);
        return it == id_of.end() ? -1 : it->second;
    }

    // ---- encode ----
    std::vector<int32_t> encode(const std::string & text, bool with_bos) const {
        std::vector<int32_t> out;
        if (with_bos && bos >= 0) out.push_back(bos);
        if (kind == tok_kind::gpt2) {
            for (const std::string & word : gpt2_pretokenize(text)) bpe_gpt2(word, out);
        } else {
            spm_encode(text, out);
        }
        return out;
    }

    // Bytes of one token as text (control tokens: empty).
    std::string piece(int32_t id) const {
        if (id < 0 || id >= n_vocab()) return std::string();
        const std::string & t = tokens[(size_t) id];
        if (types[(size_t) id] == TOK_CONTROL) return std::string();
        if (kind == tok_kind::gpt2) {
            static const std::unordered_map<uint32_t, uint8_t> inv = [] {
                std::unordered_map<uint32_t, uint8_t> m;
                for (int b = 0; b < 256; ++b) m[byte_to_cp()[b]] = (uint8_t) b;
                return m;
            }();
            std::string s;
            for (uint32_t c : utf8_decode(t)) {
                auto it = inv.find(c);
                if (it != inv.end()) s += (char) it->second;
                else s += cp_to_utf8(c);
            }
            return s;
        }
        // a byte token is spelled <0xHH>; a file that marks another text as a byte token
        // (untrusted metadata) gets that text decoded as an ordinary piece
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
            return std::string(1, (char) strtol(t.substr(3, 2).c_str(), nullptr, 16));
        }
        std::string s;
        for (size_t i = 0; i < t.size();) {
            if (t.compare(i, 3, "\xE2\x96\x81") == 0) { s += ' '; i += 3; }
            else s += t[i++];
        }
        return s;
    }

    // Text of a sequence; for spm the leading space the prefix added is removed.
    std::string decode(const std::vector<int32_t> & ids) const {
        std::string s;
        bool first = true;
        for (int32_t id : ids) {
            std::string p = piece(id);
            if (p.empty()) continue;
            if (first && kind == tok_kind::spm && add_space_prefix && p[0] == ' ') p.erase(0, 1);
            first = false;
            s += p;
        }
        return s;
    }

private:
    void bpe_gpt2(const std::string & word, std::vector<int32_t> & out) const {
        std::vector<std::string> sym;
        for (unsigned char b : word) sym.push_back(byte_to_token_str(b));
        // merge the lowest-ranked adjacent pair until none applies
        while (sym.size() > 1) {
            int32_t best = INT32_MAX;
            size_t at = 0;
            for (size_t i = 0; i + 1 < sym.size(); ++i) {
                auto it = merge_rank.find(sym[i] + " " + sym[i + 1]);
                if (it != merge_rank.end() && it->second < best) { best = it->second; at = i; }
            }
            if (best == INT32_MAX) break;
            sym[at] += sym[at + 1];
            sym.erase(sym.begin() + (long) at + 1);
        }
        for (const std::string & s : sym) {
            const int32_t id = lookup(s);
            if (id >= 0) { out.push_back(id); continue; }
            // not in the vocabulary (inconsistent merges): fall back to its bytes' symbols
            for (uint32_t c : utf8_decode(s)) {
                const int32_t b = lookup(cp_to_utf8(c));
                if (b >= 0) out.push_back(b);
                else if (unk >= 0) out.push_back(unk);
            }
        }
    }

    void spm_encode(const std::string & text, std::vector<int32_t> & out) const {
        if (text.empty()) return;
        std::string s;
        if (add_space_prefix) s += "\xE2\x96\x81";
        for (char c : text) {
            if (c == ' ') s += "\xE2\x96\x81";
            else s += c;
        }
        // one symbol per character; an invalid sequence is one byte a symbol, so a lead
        // byte never swallows the start of the next character (a U+2581 above all)
        std::vector<size_t> starts;
        utf8_decode(s, &starts);
        std::vector<std::string> sym;
        for (size_t k = 0; k < starts.size(); ++k) {
            const size_t end = k + 1 < starts.size() ? starts[k + 1] : s.size();
            sym.push_back(s.substr(starts[k], end - starts[k]));
        }
        // merge the adjacent pair with the highest score (leftmost on ties) while it is a token
        while (sym.size() > 1) {
            float best = 0.0f;
            bool found = false;
            size_t at = 0;
            for (size_t i = 0; i + 1 < sym.size(); ++i) {
                const int32_t id = lookup(sym[i] + sym[i + 1]);
                if (id < 0) continue;
                if (!found || scores[(size_t) id] > best) { best = scores[(size_t) id]; at = i; found = true; }
            }
            if (!found) break;
            sym[at] += sym[at + 1];
            sym.erase(sym.begin() + (long) at + 1);
        }
        for (const std::string & x : sym) {
            const int32_t id = lookup(x);
            if (id >= 0) out.push_back(id);
            else spm_byte_fallback(x, out);
        }
    }

    // The bytes of a symbol not in the vocabulary as byte tokens; a U+2581 stands for the
    // space it replaced, so it falls back to <0x20> (its own three bytes would decode as
    // that character, not as the space of the text).
    void spm_byte_fallback(const std::string & x, std::vector<int32_t> & out) const {
        for (size_t i = 0; i < x.size(); ++i) {
            unsigned char b = (unsigned char) x[i];
            if (x.compare(i, 3, "\xE2\x96\x81") == 0) { b = ' '; i += 2; }
            if (byte_tok[b] >= 0) out.push_back(byte_tok[b]);
            else if (unk >= 0) out.push_back(unk);
        }
    }
};

// ---- a small built-in byte-level BPE vocabulary ------------------------------------------
// Trained at start-up (deterministically) on a short built-in English text: 256 byte
// tokens, then `n_merges` merges, then <|endoftext|>. Used by the embedded demo model.
inline const char * builtin_text() {
    return "The quick brown fox jumps over the lazy dog. A tensor is an array of numbers with a shape; "
           "a graph is a list of operations on tensors. The allocator plans where every tensor lives, "
           "so that the memory of tensors that are no longer needed is reused by the ones that come later. "
           "Weights are loaded once from a model file into a buffer of their own, the key and value cache "
           "lives in another buffer, and the activations of each step share one compute buffer that is "
           "planned before the model runs. Once upon a time there was a little model that wanted to speak. "
           "It read the words of the people around it and learned which word comes after which, and in the "
           "end it could tell stories about the sea, the mountains, the city and the stars. ";
}

inline void build_builtin_gpt2_vocab(int n_merges, tokenizer & tok, std::vector<std::string> & merges) {
    tok = tokenizer();
    tok.kind = tok_kind::gpt2;
    merges.clear();
    for (int b = 0; b < 256; ++b) tok.tokens.push_back(byte_to_token_str((uint8_t) b));
    // words as symbol sequences
    std::vector<std::vector<std::string>> words;
    for (const std::string & w : gpt2_pretokenize(builtin_text())) {
        std::vector<std::string> s;
        for (unsigned char b : w) s.push_back(byte_to_token_str(b));
        words.push_back(s);
    }
    for (int m = 0; m < n_merges; ++m) {
        std::unordered_map<std::string, int> count;
        std::vector<std::string> order;  // first-seen order for deterministic ties
        for (auto & w : words) {
            for (size_t i = 0; i + 1 < w.size(); ++i) {
                const std::string key = w[i] + " " + w[i + 1];
                if (count[key]++ == 0) order.push_back(key);
            }
        }
        std::string best;
        int best_n = 0;
        for (const std::string & k : order) {
            if (count[k] > best_n) { best_n = count[k]; best = k; }
        }
        if (best.empty()) break;
        merges.push_back(best);
        const size_t sp = best.find(' ');
        const std::string a = best.substr(0, sp), b = best.substr(sp + 1);
        bool dup = false;
        for (const std::string & t : tok.tokens) dup = dup || t == a + b;
        if (!dup) tok.tokens.push_back(a + b);
        for (auto & w : words) {
            for (size_t i = 0; i + 1 < w.size(); ++i) {
                if (w[i] == a && w[i + 1] == b) { w[i] += b; w.erase(w.begin() + (long) i + 1); }
            }
        }
    }
    tok.tokens.push_back("<|endoftext|>");
    tok.types.assign(tok.tokens.size(), TOK_NORMAL);
    tok.types.back() = TOK_CONTROL;
    tok.scores.assign(tok.tokens.size(), 0.0f);
    tok.bos = tok.eos = (int32_t) tok.tokens.size() - 1;
    tok.add_bos = false;
    tok.set_merges(merges);
    tok.finish();
}

} // namespace trun
