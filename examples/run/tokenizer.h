// tokenizer.h - tokenizers from GGUF metadata (tokenizer.ggml.*), as llama.cpp reads them.
//
//   gpt2  : byte-level BPE. Text is split by the pre-tokenizer tokenizer.ggml.pre names
//           (pretokenize.h), each piece's bytes map to printable code points
//           (bytes_to_unicode), then merges apply by rank: a priority queue over a linked list
//           of symbols, so a piece of n bytes takes O(n log n); whole pieces are cached.
//   llama : SentencePiece-style BPE. Spaces become U+2581 (with a leading one when
//           add_space_prefix), UTF-8 characters merge by highest score while the merged
//           string is in the vocabulary; leftovers fall back to <0xXX> byte tokens.
//
// Control and user-defined tokens written in the text are recognised as llama.cpp's
// parse_special does: the text is cut at their spellings first, longest first (user-defined
// ones always, control ones only when asked).
#pragma once

#include "pretokenize.h"
#include "tessera/gguf.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trun {

enum class tok_kind { gpt2, spm };

// llama.cpp's token types
enum tok_type { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5, TOK_BYTE = 6 };

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
// Each byte's printable code point in UTF-8, made once (BPE maps every byte of a prompt).
inline const std::string & byte_to_token_str(uint8_t b) {
    static const std::vector<std::string> table = [] {
        std::vector<std::string> t;
        for (int c = 0; c < 256; ++c) t.push_back(cp_to_utf8(byte_to_cp()[(size_t) c]));
        return t;
    }();
    return table[b];
}

// ---- the tokenizer ----------------------------------------------------------------------------
struct tokenizer {
    tok_kind kind = tok_kind::gpt2;
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    std::vector<std::string> merges;  // gpt2: "a b", by rank
    int32_t bos = -1, eos = -1, unk = -1;
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = true;
    const pretokenizer * pre = find_pretokenizer("gpt-2");  // gpt2: how text is split
    int32_t byte_tok[256];  // spm: <0xXX> tokens (-1 if absent)

    int32_t n_vocab() const { return (int32_t) tokens.size(); }

    // Build the lookup tables after tokens/scores/types/merges are filled.
    void finish() {
        build_token_index();
        for (int b = 0; b < 256; ++b) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            byte_tok[b] = lookup(name);
            byte_sym[b] = lookup(byte_to_token_str((uint8_t) b));
        }
        build_merge_table();
        build_special_list();
        cache.clear();
    }

    void set_merges(std::vector<std::string> m) { merges = std::move(m); }

    // Select the pre-tokenizer by its tokenizer.ggml.pre name; false + err naming it when
    // tessera does not know it (a silent fallback would split text unlike the model's own).
    bool set_pre(const std::string & name, std::string & err) {
        const pretokenizer * p = find_pretokenizer(name);
        if (!p) {
            err = "unknown tokenizer.ggml.pre '" + name + "' (supported: " + pretokenizer_names() + ")";
            return false;
        }
        pre = p;
        cache.clear();
        return true;
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
        merges.clear();
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
        if (!spm && !load_pre(g, err)) return false;
        // llama.cpp's defaults: SPM and Llama 3 add BOS; the file's keys decide
        add_bos = get_bool("tokenizer.ggml.add_bos_token", spm || pre->add_bos) && bos >= 0;
        add_eos = get_bool("tokenizer.ggml.add_eos_token", false) && eos >= 0;
        add_space_prefix = get_bool("tokenizer.ggml.add_space_prefix", true);
        finish();
        return true;
    }

    // tokenizer.ggml.pre; a file without it gets llama.cpp's "default" splitting
    bool load_pre(const tsr_gguf_context * g, std::string & err) {
        const int64_t k = tsr_gguf_find_key(g, "tokenizer.ggml.pre");
        if (k < 0) return set_pre("default", err);
        if (tsr_gguf_get_kv_type(g, k) != TSR_GGUF_TYPE_STRING) {
            err = "tokenizer.ggml.pre is not a string";
            return false;
        }
        return set_pre(tsr_gguf_get_val_str(g, k), err);
    }

    // Write this tokenizer's metadata (used by the random-model writer and tests).
    bool save(tsr_gguf_context * g, const std::vector<std::string> & merge_list) const {
        std::vector<const char *> p(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) p[i] = tokens[i].c_str();
        bool ok = tsr_gguf_set_val_str(g, "tokenizer.ggml.model", kind == tok_kind::gpt2 ? "gpt2" : "llama");
        ok = ok && tsr_gguf_set_arr_str(g, "tokenizer.ggml.tokens", p.data(), p.size());
        ok = ok && tsr_gguf_set_arr_data(g, "tokenizer.ggml.token_type", TSR_GGUF_TYPE_INT32, types.data(), types.size());
        if (kind == tok_kind::spm) ok = ok && tsr_gguf_set_arr_data(g, "tokenizer.ggml.scores", TSR_GGUF_TYPE_FLOAT32, scores.data(), scores.size());
        if (!merge_list.empty()) {
            std::vector<const char *> m(merge_list.size());
            for (size_t i = 0; i < merge_list.size(); ++i) m[i] = merge_list[i].c_str();
            ok = ok && tsr_gguf_set_arr_str(g, "tokenizer.ggml.merges", m.data(), m.size());
        }
        if (kind == tok_kind::gpt2) ok = ok && tsr_gguf_set_val_str(g, "tokenizer.ggml.pre", pre->name);
        if (bos >= 0) ok = ok && tsr_gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t) bos);
        if (eos >= 0) ok = ok && tsr_gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t) eos);
        if (unk >= 0) ok = ok && tsr_gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", (uint32_t) unk);
        ok = ok && tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", add_bos);
        ok = ok && tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_eos_token", add_eos);
        if (kind == tok_kind::spm) ok = ok && tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", add_space_prefix);
        return ok;
    }

    // The id of a token's text, -1 when none (the first id when a text repeats).
    int32_t lookup(std::string_view s) const {
        if (token_slots.empty()) return -1;
        for (size_t h = std::hash<std::string_view>()(s) & slot_mask;; h = (h + 1) & slot_mask) {
            const int32_t id = token_slots[h];
            if (id < 0 || tokens[(size_t) id] == s) return id;
        }
    }

    // ---- encode ----
    // Like llama_tokenize: add_special adds BOS / EOS where the vocabulary asks for them
    // (add_bos_token, add_eos_token); parse_special recognises control tokens written in the
    // text. Stops once the ids would pass max_tokens and returns false (a prompt that
    // cannot fit the context is not tokenized to its end); `out` then holds the first ones.
    bool encode(const std::string & text, std::vector<int32_t> & out, bool add_special, bool parse_special,
                size_t max_tokens = SIZE_MAX) const {
        out.clear();
        if (add_special && add_bos && bos >= 0) out.push_back(bos);
        bool prev_special = true;  // spm: the text after a special token gets the space prefix
        for (const fragment & f : split_special(text, parse_special)) {
            if (out.size() > max_tokens) break;
            if (f.token >= 0) {
                out.push_back(f.token);
                prev_special = true;
                continue;
            }
            const std::string part = text.substr(f.begin, f.end - f.begin);
            if (kind == tok_kind::gpt2) bpe_encode(part, out, max_tokens);
            else spm_encode(part, add_space_prefix && prev_special, out);
            prev_special = false;
        }
        if (add_special && add_eos && eos >= 0) out.push_back(eos);
        if (out.size() > max_tokens) {
            out.resize(max_tokens);
            return false;
        }
        return true;
    }

    std::vector<int32_t> encode(const std::string & text, bool add_special, bool parse_special = false) const {
        std::vector<int32_t> out;
        encode(text, out, add_special, parse_special);
        return out;
    }

    // Bytes of one token as text (control tokens: empty).
    std::string piece(int32_t id) const {
        if (id < 0 || id >= n_vocab()) return std::string();
        const std::string & t = tokens[(size_t) id];
        if (types[(size_t) id] == TOK_CONTROL) return std::string();
        // a user-defined token is found in text by its spelling, so it stands for that text
        // as written (llama.cpp's token_to_piece), not for bytes_to_unicode code points
        if (kind == tok_kind::gpt2 && types[(size_t) id] == TOK_USER) return t;
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
    // gpt2 merges by the ids of their two parts: rank and the id of the merged token (-1
    // when the vocabulary lacks it: the merge still happens, as in llama.cpp)
    struct merge_info { int32_t rank, id; };
    std::unordered_map<uint64_t, merge_info> merge_of;
    int32_t byte_sym[256];  // gpt2: the token of each byte's printable code point
    std::vector<int32_t> special_ids;  // control, user-defined and unknown tokens, longest first
    // whole pieces already encoded (a prompt repeats its words); one thread at a time
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
    static constexpr size_t cache_max_entries = 1 << 16, cache_max_piece = 256;

    // BPE work space, kept between pieces so that a prompt does not allocate per word
    struct symbol { int32_t id; int prev, next; size_t begin, end; };  // [begin, end): bytes of the piece
    struct candidate {
        int32_t rank; int left; int32_t left_id, right_id;
        // lowest rank first, leftmost among equals (llama.cpp's order)
        static bool later(const candidate & x, const candidate & y) { return x.rank != y.rank ? x.rank > y.rank : x.left > y.left; }
    };
    mutable std::vector<symbol> scratch_symbols;
    mutable std::vector<candidate> scratch_queue;

    // token text -> id: open addressing over the ids, at most half full, so that a lookup
    // hashes once, compares with a token or two and allocates nothing (loading Llama 3's
    // 280,147 merges takes three lookups each)
    std::vector<int32_t> token_slots;
    size_t slot_mask = 0;

    void build_token_index() {
        size_t cap = 16;
        while (cap < 2 * tokens.size()) cap <<= 1;
        token_slots.assign(cap, -1);
        slot_mask = cap - 1;
        for (size_t i = 0; i < tokens.size(); ++i) {
            size_t h = std::hash<std::string_view>()(tokens[i]) & slot_mask;
            while (token_slots[h] >= 0 && tokens[(size_t) token_slots[h]] != tokens[i]) h = (h + 1) & slot_mask;
            if (token_slots[h] < 0) token_slots[h] = (int32_t) i;
        }
    }

    static uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t) (uint32_t) a << 32 | (uint32_t) b; }

    void build_merge_table() {
        merge_of.clear();
        merge_of.reserve(merges.size());
        std::string joined;
        for (size_t r = 0; r < merges.size(); ++r) {
            const std::string_view m = merges[r];
            const size_t sp = m.find(' ', 1);
            if (sp == std::string::npos) continue;
            const int32_t a = lookup(m.substr(0, sp)), b = lookup(m.substr(sp + 1));
            if (a < 0 || b < 0) continue;  // a part no symbol can be: the merge never applies
            joined.assign(m.substr(0, sp)).append(m.substr(sp + 1));
            merge_of.emplace(pair_key(a, b), merge_info{(int32_t) r, lookup(joined)});
        }
    }

    void build_special_list() {
        special_ids.clear();
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int32_t t = types[i];
            if ((t == TOK_CONTROL || t == TOK_USER || t == TOK_UNKNOWN) && !tokens[i].empty()) special_ids.push_back((int32_t) i);
        }
        std::stable_sort(special_ids.begin(), special_ids.end(),
                         [&](int32_t a, int32_t b) { return tokens[(size_t) a].size() > tokens[(size_t) b].size(); });
    }

    // A part of the text: a byte range to tokenize, or a special token found in it.
    struct fragment { size_t begin, end; int32_t token; };

    // llama.cpp's tokenizer_st_partition: cut the text at each special token's spelling,
    // longest token first; control and unknown tokens only when parse_special
    std::vector<fragment> split_special(const std::string & text, bool parse_special) const {
        std::vector<fragment> parts;
        if (!text.empty()) parts.push_back({0, text.size(), -1});
        // spm keeps its old behaviour unless asked: its user-defined tokens are plain text
        if (kind == tok_kind::spm && !parse_special) return parts;
        for (int32_t id : special_ids) {
            const int32_t t = types[(size_t) id];
            if (!parse_special && t != TOK_USER) continue;
            const std::string & s = tokens[(size_t) id];
            if (text.find(s) == std::string::npos) continue;
            std::vector<fragment> next;
            for (const fragment & f : parts) {
                if (f.token >= 0) { next.push_back(f); continue; }
                size_t pos = f.begin;
                for (size_t hit = text.find(s, pos); hit != std::string::npos && hit + s.size() <= f.end; hit = text.find(s, pos)) {
                    if (hit > pos) next.push_back({pos, hit, -1});
                    next.push_back({hit, hit + s.size(), id});
                    pos = hit + s.size();
                }
                if (pos < f.end) next.push_back({pos, f.end, -1});
            }
            parts.swap(next);
        }
        return parts;
    }

    // Pre-tokenize, then BPE each piece (from the cache when it was seen before).
    void bpe_encode(const std::string & text, std::vector<int32_t> & out, size_t max_tokens) const {
        const cp_text t(text);
        for (const cp_range & r : pretokenize_ranges(*pre, t)) {
            if (out.size() > max_tokens) return;
            const size_t b = t.at[r.begin], e = t.at[r.end];
            const std::string piece_text = text.substr(b, e - b);
            auto hit = cache.find(piece_text);
            if (hit != cache.end()) {
                out.insert(out.end(), hit->second.begin(), hit->second.end());
                continue;
            }
            const size_t first = out.size();
            bpe_piece(piece_text, out);
            if (piece_text.size() <= cache_max_piece) {
                if (cache.size() >= cache_max_entries) cache.clear();
                cache.emplace(piece_text, std::vector<int32_t>(out.begin() + (long) first, out.end()));
            }
        }
    }

    // One piece: its bytes as symbols, merged lowest rank first (leftmost among equals),
    // through a queue of candidate pairs over a linked list: O(n log n) for n bytes.
    void bpe_piece(const std::string & piece_text, std::vector<int32_t> & out) const {
        if (piece_text.empty()) return;
        if (pre->ignore_merges) {
            std::string mapped;  // the piece in bytes_to_unicode code points
            for (unsigned char c : piece_text) mapped += byte_to_token_str(c);
            const int32_t whole = lookup(mapped);
            if (whole >= 0) { out.push_back(whole); return; }
        }
        std::vector<symbol> & sym = scratch_symbols;
        sym.clear();
        for (size_t i = 0; i < piece_text.size(); ++i) {
            sym.push_back({byte_sym[(unsigned char) piece_text[i]], (int) i - 1, (int) i + 1, i, i + 1});
        }
        sym.back().next = -1;
        std::vector<candidate> & queue = scratch_queue;  // a heap: the next merge on top
        queue.clear();
        auto consider = [&](int left) {
            if (left < 0 || sym[(size_t) left].next < 0) return;
            const symbol & a = sym[(size_t) left], & b = sym[(size_t) a.next];
            if (a.id < 0 || b.id < 0) return;
            auto m = merge_of.find(pair_key(a.id, b.id));
            if (m == merge_of.end()) return;
            queue.push_back({m->second.rank, left, a.id, b.id});
            std::push_heap(queue.begin(), queue.end(), candidate::later);
        };
        for (int i = 0; i + 1 < (int) sym.size(); ++i) consider(i);
        while (!queue.empty()) {
            std::pop_heap(queue.begin(), queue.end(), candidate::later);
            const candidate c = queue.back();
            queue.pop_back();
            symbol & a = sym[(size_t) c.left];
            // stale: the left symbol was merged away (id -2) or either side changed since
            if (a.id != c.left_id || a.next < 0 || sym[(size_t) a.next].id != c.right_id) continue;
            symbol & b = sym[(size_t) a.next];
            a.id = merge_of.at(pair_key(c.left_id, c.right_id)).id;
            a.end = b.end;
            a.next = b.next;
            if (b.next >= 0) sym[(size_t) b.next].prev = c.left;
            b.id = -2;
            consider(a.prev);
            consider(c.left);
        }
        for (int i = 0; i >= 0; i = sym[(size_t) i].next) {
            const symbol & s = sym[(size_t) i];
            if (s.id >= 0) { out.push_back(s.id); continue; }
            // merged into a string the vocabulary lacks (inconsistent merges): its bytes'
            // tokens, so that no text is lost (llama.cpp drops the bytes that are not ASCII)
            for (size_t k = s.begin; k < s.end; ++k) {
                const int32_t b = byte_sym[(unsigned char) piece_text[k]];
                if (b >= 0) out.push_back(b);
                else if (unk >= 0) out.push_back(unk);
            }
        }
    }

    void spm_encode(const std::string & text, bool space_prefix, std::vector<int32_t> & out) const {
        if (text.empty()) return;
        std::string s;
        if (space_prefix) s += "\xE2\x96\x81";
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
