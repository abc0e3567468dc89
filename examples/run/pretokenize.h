// pretokenize.h - the pre-tokenizers of byte-level BPE vocabularies, selected by the GGUF key
// tokenizer.ggml.pre, each splitting text exactly as llama.cpp does for that name.
//
// llama.cpp runs a list of regular expressions per name, each splitting every piece the
// previous one left (the text between two matches is a piece of its own too). Its GPT-2
// and Llama 3 patterns run as hand-written scanners (unicode.cpp); the others through
// std::regex, on text where every code point above 0x7F stands for its category (Unicode
// whitespace becomes \v, so \s means ASCII whitespace or Unicode White_Space). Here every
// pattern is a hand-written scanner with those semantics, linear in the text.
#pragma once

#include "unicode_tables.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace trun {

// ---- code points -------------------------------------------------------------------------
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
// An invalid UTF-8 byte decodes alone, to 0xDC00 + byte (a lone surrogate no valid text
// holds): pieces are byte ranges of the text, so nothing of it is lost.
inline constexpr uint32_t CP_INVALID_BASE = 0xDC00;
inline std::vector<uint32_t> utf8_decode(const std::string & s, std::vector<size_t> * starts = nullptr) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    if (starts) starts->reserve(s.size());
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
        if (!ok) { cp = CP_INVALID_BASE + c; n = 1; }
        if (starts) starts->push_back(i);
        out.push_back(cp);
        i += n;
    }
    return out;
}

// Class bits of a code point (unicode_tables.h). llama.cpp reads an invalid byte as U+FFFD,
// a symbol; so do these.
inline uint8_t cp_bits(uint32_t cp) {
    if (cp >= CP_INVALID_BASE + 0x80 && cp <= CP_INVALID_BASE + 0xFF) cp = 0xFFFD;
    if (cp < 0x80) {
        // ASCII is most text: a direct table
        static const auto ascii = [] {
            std::array<uint8_t, 0x80> t{};
            for (uint32_t c = 0; c < 0x80; ++c) {
                t[c] = ucd_class_bits[std::upper_bound(ucd_class_start, ucd_class_start + ucd_n_runs, c) - ucd_class_start - 1];
            }
            return t;
        }();
        return ascii[cp];
    }
    if (cp >= 0x110000) return 0;
    return ucd_class_bits[std::upper_bound(ucd_class_start, ucd_class_start + ucd_n_runs, cp) - ucd_class_start - 1];
}
inline bool cp_is_space(uint32_t c) { return (cp_bits(c) & UCD_WHITESPACE) != 0; }
inline bool cp_is_letter(uint32_t c) { return (cp_bits(c) & UCD_LETTER) != 0; }
inline bool cp_is_number(uint32_t c) { return (cp_bits(c) & UCD_NUMBER) != 0; }
inline bool cp_is_punct(uint32_t c) { return (cp_bits(c) & UCD_PUNCT) != 0; }
inline uint32_t cp_tolower(uint32_t c) {
    const ucd_case_pair * end = ucd_lower + ucd_n_lower;
    const ucd_case_pair * it = std::lower_bound(ucd_lower, end, c, [](const ucd_case_pair & p, uint32_t v) { return p.cp < v; });
    return it != end && it->cp == c ? it->lower : c;
}

// ---- pieces ----------------------------------------------------------------------------------
// A piece is a half-open range of code point indices.
struct cp_range { size_t begin, end; };

// The text as the splitters see it: code points and where each starts in the bytes.
struct cp_text {
    std::vector<size_t> at;  // byte offset of each code point, plus the text's size at the end
    std::vector<uint32_t> cp;
    explicit cp_text(const std::string & s) : at(), cp(utf8_decode(s, &at)) { at.push_back(s.size()); }
};

// One splitting rule: appends the pieces of `r` to `out`, covering it without gaps.
using split_fn = void (*)(const cp_text & t, cp_range r, std::vector<cp_range> & out);

// ---- the GPT-2 and Llama 3 patterns (llama.cpp's unicode_regex_split_custom_*) ---------------
// Reads code points of one piece; past its ends there is nothing (class 0, no code point).
struct piece_reader {
    const std::vector<uint32_t> & cp;
    cp_range r;
    static constexpr uint32_t NONE = 0xFFFFFFFF;
    uint32_t at(size_t i) const { return i >= r.begin && i < r.end ? cp[i] : NONE; }
    uint8_t bits(size_t i) const { return i >= r.begin && i < r.end ? cp_bits(cp[i]) : 0; }
    bool in(size_t i) const { return i >= r.begin && i < r.end; }
    bool space(size_t i) const { return (bits(i) & UCD_WHITESPACE) != 0; }
    bool letter(size_t i) const { return (bits(i) & UCD_LETTER) != 0; }
    bool number(size_t i) const { return (bits(i) & UCD_NUMBER) != 0; }
    // [^\s\p{L}\p{N}]: anything inside the piece that is no space, letter or number
    bool other(size_t i) const { return in(i) && !(bits(i) & (UCD_WHITESPACE | UCD_LETTER | UCD_NUMBER)); }
};

// 's|'t|'re|'ve|'m|'ll|'d (case-folded when `fold`): the length matched at i, or 0
inline size_t match_contraction(const piece_reader & p, size_t i, bool fold) {
    if (p.at(i) != '\'' || !p.in(i + 1)) return 0;
    auto low = [&](size_t k) { const uint32_t c = p.at(k); return fold && c != piece_reader::NONE ? cp_tolower(c) : c; };
    const uint32_t a = low(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (!p.in(i + 2)) return 0;
    const uint32_t b = low(i + 2);
    return (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') ? 3 : 0;
}

// \s+(?!\S)|\s+ at i: a run of n spaces followed by more text leaves its last space to the
// next piece (so " word" stays together); at the end of the piece it takes them all
inline size_t match_space_run(const piece_reader & p, size_t i) {
    size_t n = 0;
    while (p.space(i + n)) ++n;
    if (n > 1 && p.in(i + n)) return n - 1;
    return n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline void split_gpt2(const cp_text & t, cp_range r, std::vector<cp_range> & out) {
    const piece_reader p{t.cp, r};
    for (size_t i = r.begin; i < r.end;) {
        size_t end = i + match_contraction(p, i, false);
        if (end == i) {
            const size_t j = i + (p.at(i) == ' ' ? 1 : 0);  // the optional leading space
            if (p.letter(j)) { end = j; while (p.letter(end)) ++end; }
            else if (p.number(j)) { end = j; while (p.number(end)) ++end; }
            else if (p.other(j)) { end = j; while (p.other(end)) ++end; }
            else end = i + std::max<size_t>(1, match_space_run(p, i));
        }
        out.push_back({i, end});
        i = end;
    }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Llama 3 groups digits by up to 3, Qwen2 (the same pattern through std::regex) by 1.
template <size_t max_digits>
inline void split_llama3(const cp_text & t, cp_range r, std::vector<cp_range> & out) {
    const piece_reader p{t.cp, r};
    auto newline = [&](size_t k) { const uint32_t c = p.at(k); return c == '\r' || c == '\n'; };
    for (size_t i = r.begin; i < r.end;) {
        size_t end = i + match_contraction(p, i, true);
        if (end == i && !newline(i) && !p.number(i) && (p.letter(i) || p.letter(i + 1))) {
            end = i + 1;  // a letter, or one code point before letters
            while (p.letter(end)) ++end;
        }
        if (end == i && p.number(i)) {
            while (end - i < max_digits && p.number(end)) ++end;
        }
        if (end == i) {
            const size_t j = i + (p.at(i) == ' ' ? 1 : 0);
            if (p.other(j)) {
                end = j;
                while (p.other(end)) ++end;
                while (newline(end)) ++end;
            }
        }
        if (end == i) {
            size_t n = 0, last_newline = 0;
            for (; p.space(i + n); ++n) {
                if (newline(i + n)) last_newline = i + n + 1;
            }
            end = last_newline ? last_newline : i + std::max<size_t>(1, match_space_run(p, i));
        }
        out.push_back({i, end});
        i = end;
    }
}

// ---- the std::regex patterns: a match finder per pattern, the text between matches kept ---------
// Finds the first match at or after `from` within r; false when there is none.
using find_fn = bool (*)(const cp_text & t, cp_range r, size_t from, cp_range & m);

template <find_fn find>
inline void split_matches(const cp_text & t, cp_range r, std::vector<cp_range> & out) {
    size_t pos = r.begin;
    cp_range m{};
    while (pos < r.end && find(t, r, pos, m)) {
        if (m.begin > pos) out.push_back({pos, m.begin});
        out.push_back(m);
        pos = m.end;
    }
    if (pos < r.end) out.push_back({pos, r.end});
}

// Code point classes as the std::regex patterns test them. \s: ASCII whitespace, or Unicode
// White_Space (llama.cpp turns that into \v before matching).
inline bool rx_space(uint32_t c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c > 0x7F && cp_is_space(c)); }
inline bool rx_number(uint32_t c) { return !rx_space(c) && cp_is_number(c); }
inline bool rx_digit(uint32_t c) { return c >= '0' && c <= '9'; }
inline bool rx_newline(uint32_t c) { return c == '\r' || c == '\n'; }
// [\p{P}\$\+<=>\^~\|`] (llama.cpp's falcon) and the same without the backtick (its default)
inline bool rx_punct_or_ascii_symbol(uint32_t c) {
    return (!rx_space(c) && cp_is_punct(c)) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
}
inline bool rx_falcon_punct(uint32_t c) { return rx_punct_or_ascii_symbol(c) || c == '`'; }

struct cp_span { uint32_t lo, hi; };
template <size_t N>
inline bool in_spans(const cp_span (&spans)[N], uint32_t c) {
    for (const cp_span & s : spans) {
        if (c >= s.lo && c <= s.hi) return true;
    }
    return false;
}
// deepseek-llm's letter class, as llama.cpp spells it (a hand-made list, not \p{L})
inline bool rx_deepseek_letter(uint32_t c) {
    static const cp_span spans[] = {
        {'A', 'Z'}, {'a', 'z'}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA}, {0x1BC, 0x1BF}, {0x1C4, 0x293},
        {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377}, {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A},
        {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556}, {0x10A0, 0x10C5},
        {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77},
        {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57},
        {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
        {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
        {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113}, {0x2115, 0x2115},
        {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134},
        {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B},
        {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
        {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
        {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
        {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
    };
    return in_spans(spans, c);
}
// deepseek-llm's punctuation class [!-/:-~！-／：-～‘-‟　-。]; U+3000 is whitespace, so
// (turned into \v) it never matches here
inline bool rx_deepseek_punct(uint32_t c) {
    static const cp_span spans[] = {{'!', '/'}, {':', '~'}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3001, 0x3002}};
    return in_spans(spans, c);
}
// deepseek-llm's CJK class [一-龥ࠀ-一가-퟿]
inline bool rx_deepseek_cjk(uint32_t c) {
    static const cp_span spans[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};
    return in_spans(spans, c) && !rx_space(c);
}

// [C]+, or [C] alone when `single`
template <bool (*cls)(uint32_t), bool single>
inline bool find_run(const cp_text & t, cp_range r, size_t from, cp_range & m) {
    for (size_t i = from; i < r.end; ++i) {
        if (!cls(t.cp[i])) continue;
        size_t e = i + 1;
        while (!single && e < r.end && cls(t.cp[e])) ++e;
        m = {i, e};
        return true;
    }
    return false;
}
// \s?[C]+: a whitespace joins the run it stands right before
template <bool (*cls)(uint32_t)>
inline bool find_space_run(const cp_text & t, cp_range r, size_t from, cp_range & m) {
    for (size_t i = from; i < r.end; ++i) {
        const bool lead = rx_space(t.cp[i]) && i + 1 < r.end && cls(t.cp[i + 1]);
        if (!lead && !cls(t.cp[i])) continue;
        size_t e = i + 1;
        while (e < r.end && cls(t.cp[e])) ++e;
        m = {i, e};
        return true;
    }
    return false;
}
// [0-9][0-9][0-9]
inline bool find_three_digits(const cp_text & t, cp_range r, size_t from, cp_range & m) {
    for (size_t i = from; i + 3 <= r.end; ++i) {
        if (rx_digit(t.cp[i]) && rx_digit(t.cp[i + 1]) && rx_digit(t.cp[i + 2])) { m = {i, i + 3}; return true; }
    }
    return false;
}
// \s+$: the whitespace that ends the piece
inline bool find_trailing_space(const cp_text & t, cp_range r, size_t from, cp_range & m) {
    size_t b = r.end;
    while (b > from && rx_space(t.cp[b - 1])) --b;
    if (b == r.end) return false;
    m = {b, r.end};
    return true;
}

// ---- the pre-tokenizers by name ----------------------------------------------------------------
struct pretokenizer {
    const char * name;
    std::vector<split_fn> steps;  // applied in order, each to every piece of the one before
    bool ignore_merges;           // a piece that is a token as a whole is taken as it is
    bool add_bos;                 // llama.cpp's default for add_bos_token
};

// The names tessera knows and what each does. An alias shares its entry's rules.
inline const std::vector<pretokenizer> & pretokenizers() {
    static const std::vector<pretokenizer> all = {
        {"default", {split_matches<find_run<rx_punct_or_ascii_symbol, false>>, split_gpt2, split_matches<find_run<rx_number, false>>,
                     split_matches<find_three_digits>}, false, false},
        {"gpt-2", {split_gpt2}, false, false},
        {"llama-bpe", {split_llama3<3>}, true, true},
        {"qwen2", {split_llama3<1>}, false, false},
        {"smollm", {split_matches<find_run<rx_number, true>>, split_gpt2}, false, false},
        {"starcoder", {split_matches<find_run<rx_number, true>>, split_gpt2}, false, false},
        {"falcon", {split_matches<find_run<rx_falcon_punct, false>>, split_gpt2, split_matches<find_three_digits>}, false, false},
        {"deepseek-llm", {split_matches<find_run<rx_newline, true>>, split_matches<find_space_run<rx_deepseek_letter>>,
                          split_matches<find_space_run<rx_deepseek_punct>>, split_matches<find_trailing_space>,
                          split_matches<find_run<rx_deepseek_cjk, false>>, split_matches<find_run<rx_number, false>>}, false, false},
    };
    return all;
}

// The entry for a tokenizer.ggml.pre value (llama.cpp's aliases included), or nullptr.
inline const pretokenizer * find_pretokenizer(const std::string & name) {
    static const std::pair<const char *, const char *> aliases[] = {
        {"llama3", "llama-bpe"}, {"llama-v3", "llama-bpe"}, {"deepseek-r1-qwen", "qwen2"}, {"", "default"},
    };
    std::string n = name;
    for (const auto & a : aliases) {
        if (n == a.first) n = a.second;
    }
    for (const pretokenizer & p : pretokenizers()) {
        if (n == p.name) return &p;
    }
    return nullptr;
}

// The names find_pretokenizer accepts, for messages.
inline std::string pretokenizer_names() {
    std::string s;
    for (const pretokenizer & p : pretokenizers()) s += (s.empty() ? "" : ", ") + std::string(p.name);
    return s;
}

// The pieces of a text under a pre-tokenizer, as code point ranges in order.
inline std::vector<cp_range> pretokenize_ranges(const pretokenizer & pre, const cp_text & t) {
    if (t.cp.empty()) return {};
    std::vector<cp_range> cur{{0, t.cp.size()}}, next;
    for (split_fn step : pre.steps) {
        next.clear();
        for (const cp_range & r : cur) step(t, r, next);
        cur.swap(next);
    }
    return cur;
}

// The same pieces as strings (tests, the built-in vocabulary's training).
inline std::vector<std::string> pretokenize(const pretokenizer & pre, const std::string & text) {
    const cp_text t(text);
    std::vector<std::string> out;
    for (const cp_range & r : pretokenize_ranges(pre, t)) out.push_back(text.substr(t.at[r.begin], t.at[r.end] - t.at[r.begin]));
    return out;
}

inline std::vector<std::string> gpt2_pretokenize(const std::string & text) { return pretokenize(*find_pretokenizer("gpt-2"), text); }

} // namespace trun
