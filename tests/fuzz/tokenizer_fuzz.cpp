// libFuzzer target: tessera-run's tokenizers (examples/run/tokenizer.h) on small random
// vocabularies, loaded the way tessera-run loads them (tokenizer::load on GGUF metadata,
// here an in-memory GGUF context), then encode + decode of random text.
// The bytes (scripts/gen-fuzz-corpus.py writes seeds in this form):
//
//   byte 0   flags: bit 0 llama (SPM) else gpt2; bit 1 all 256 byte tokens first;
//            bit 2 add_space_prefix; bit 3 add_bos_token; bit 4 scores; bit 5 token types;
//            bit 6 bos/eos/unk ids; bit 7 merges
//   byte 1   extra tokens (b % 32), byte 2 merges (b % 32)
//   then     each extra token: length byte (b % 12) and its bytes; its score and type bytes
//            each merge: two bytes naming tokens, counting back from the last one
//            (0xFF: a token not in the vocabulary)
//            bos, eos, unk: a byte each (0xFF: out of range)
//   the rest is the text to encode (invalid UTF-8 included)
//
// Properties: load never crashes and an empty vocabulary is refused naming its key;
// encode (with BOS/EOS, with control tokens parsed) yields ids inside the vocabulary;
// decode(encode(text)) == text where it must
// hold: every byte has a token, no token is a control token, and (SPM) the text has no
// literal U+2581 (SPM's spelling of a space).
// Build and run: scripts/fuzz.sh [seconds] tokenizer
#include "tessera/gguf.h"
#include "tokenizer.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct byte_reader {
    const uint8_t * data;
    size_t size;
    size_t pos = 0;
    uint8_t u8() { return pos < size ? data[pos++] : 0; }
    std::string str(size_t n) {
        std::string s;
        for (size_t i = 0; i < n && pos < size; ++i) s += (char) data[pos++];
        return s;
    }
    std::string rest() { return str(size - pos); }
};

enum flag : uint8_t {
    F_SPM = 1, F_BYTES = 2, F_SPACE_PREFIX = 4, F_ADD_BOS = 8, F_SCORES = 16, F_TYPES = 32, F_SPECIAL_IDS = 64, F_MERGES = 128
};

// The 256 byte tokens as each tokenizer spells them: GPT-2's printable symbols or <0xHH>.
void add_byte_tokens(bool spm, std::vector<std::string> & tokens, std::vector<int32_t> & types) {
    for (int b = 0; b < 256; ++b) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        tokens.push_back(spm ? std::string(name) : trun::byte_to_token_str((uint8_t) b));
        types.push_back(spm ? trun::TOK_BYTE : trun::TOK_NORMAL);
    }
}

struct vocabulary {
    uint8_t flags = 0;
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    std::vector<std::string> merges;
};

vocabulary read_vocabulary(byte_reader & in) {
    vocabulary v;
    v.flags = in.u8();
    const bool spm = v.flags & F_SPM;
    const size_t n_extra = in.u8() % 32, n_merges = in.u8() % 32;
    if (v.flags & F_BYTES) add_byte_tokens(spm, v.tokens, v.types);
    v.scores.assign(v.tokens.size(), 0.0f);
    for (size_t i = 0; i < n_extra; ++i) {
        v.tokens.push_back(in.str(in.u8() % 12));
        v.scores.push_back((float) (int8_t) in.u8());
        v.types.push_back(1 + in.u8() % 7);  // TOK_NORMAL .. TOK_BYTE, and one unknown value
    }
    // a merge side names a token counting from the last (the extra tokens are near), or none
    auto name = [&](uint8_t b) {
        if (b == 0xFF || v.tokens.empty()) return std::string("\xC4\xA0missing");
        return v.tokens[v.tokens.size() - 1 - b % v.tokens.size()];
    };
    for (size_t i = 0; i < n_merges; ++i) {
        const uint8_t a = in.u8();
        v.merges.push_back(name(a) + " " + name(in.u8()));
    }
    return v;
}

// Writes the vocabulary as tokenizer.ggml.* metadata, as a model file would carry it.
void write_metadata(const vocabulary & v, byte_reader & in, tsr_gguf_context * g) {
    std::vector<const char *> p;
    for (const std::string & t : v.tokens) p.push_back(t.c_str());
    tsr_gguf_set_val_str(g, "tokenizer.ggml.model", (v.flags & F_SPM) ? "llama" : "gpt2");
    tsr_gguf_set_arr_str(g, "tokenizer.ggml.tokens", p.data(), p.size());
    if (v.flags & F_SCORES) tsr_gguf_set_arr_data(g, "tokenizer.ggml.scores", TSR_GGUF_TYPE_FLOAT32, v.scores.data(), v.scores.size());
    if (v.flags & F_TYPES) tsr_gguf_set_arr_data(g, "tokenizer.ggml.token_type", TSR_GGUF_TYPE_INT32, v.types.data(), v.types.size());
    if (v.flags & F_MERGES) {
        std::vector<const char *> m;
        for (const std::string & s : v.merges) m.push_back(s.c_str());
        tsr_gguf_set_arr_str(g, "tokenizer.ggml.merges", m.data(), m.size());
    }
    if (v.flags & F_SPECIAL_IDS) {
        for (const char * key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"}) {
            const uint8_t b = in.u8();
            tsr_gguf_set_val_u32(g, key, b == 0xFF ? UINT32_MAX : b);
        }
    }
    tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_space_prefix", (v.flags & F_SPACE_PREFIX) != 0);
    tsr_gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", (v.flags & F_ADD_BOS) != 0);
}

bool must_round_trip(const trun::tokenizer & tok, const vocabulary & v, const std::string & text) {
    if (!(v.flags & F_BYTES)) return false;
    for (int32_t t : tok.types) {
        if (t == trun::TOK_CONTROL) return false;
        // a user-defined token's text is stored as written, not byte-encoded (llama.cpp's rule):
        // a BPE piece that spells it (e.g. "\xC4\xA0the") decodes to that spelling
        if (t == trun::TOK_USER && tok.kind == trun::tok_kind::gpt2) return false;
    }
    return tok.kind == trun::tok_kind::gpt2 || text.find("\xE2\x96\x81") == std::string::npos;
}

// Prints the failed property, the text, the ids and what they decode to, then traps.
[[noreturn]] void finding(const char * what, const std::string & text, const std::vector<int32_t> & ids, const std::string & back) {
    auto quoted = [](const std::string & s) {
        std::string q;
        char buf[8];
        for (unsigned char c : s) {
            if (c >= 32 && c < 127 && c != '\\') q += (char) c;
            else { snprintf(buf, sizeof buf, "\\x%02X", c); q += buf; }
        }
        return q;
    };
    fprintf(stderr, "tokenizer_fuzz: %s\n  text \"%s\"\n  ids ", what, quoted(text).c_str());
    for (int32_t id : ids) fprintf(stderr, "%d ", id);
    fprintf(stderr, "\n  decoded \"%s\"\n", quoted(back).c_str());
    __builtin_trap();
}

void check_encode_decode(const trun::tokenizer & tok, const vocabulary & v, const std::string & text) {
    for (int mode = 0; mode < 3; ++mode) {
        // 0: text alone, 1: with BOS/EOS, 2: control tokens written in the text parsed
        const std::vector<int32_t> ids = tok.encode(text, mode == 1, mode == 2);
        for (int32_t id : ids)
            if (id < 0 || id >= tok.n_vocab()) finding("an id outside the vocabulary", text, ids, "");
        const std::string back = tok.decode(ids);
        if (mode == 0 && must_round_trip(tok, v, text) && back != text) finding("decode(encode(text)) != text", text, ids, back);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    byte_reader in{data, size};
    const vocabulary v = read_vocabulary(in);
    tsr_gguf_context * g = tsr_gguf_init_empty();
    if (!g) return 0;
    write_metadata(v, in, g);
    const std::string text = in.rest();

    trun::tokenizer tok;
    std::string err;
    const bool loaded = tok.load(g, err);
    if (v.tokens.empty() && (loaded || err.find("tokenizer.ggml.tokens") == std::string::npos)) __builtin_trap();
    if (loaded) check_encode_decode(tok, v, text);
    tsr_gguf_free(g);
    return 0;
}
