// Tokenizers (examples/run/tokenizer.h): fixed vocabularies with hand-computed token ids,
// round trips, and loading from GGUF metadata.
#include <catch2/catch.hpp>

#include "backends.h"
#include "random_model.h"
#include "tokenizer.h"

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

using namespace trun;

namespace {

tokenizer tiny_gpt2() {
    tokenizer t;
    t.kind = tok_kind::gpt2;
    for (int b = 0; b < 256; ++b) t.tokens.push_back(byte_to_token_str((uint8_t) b));
    t.tokens.push_back("he");           // 256
    t.tokens.push_back("the");          // 257
    t.tokens.push_back("\xC4\xA0the");  // 258 "Ġthe"
    t.types.assign(t.tokens.size(), TOK_NORMAL);
    t.scores.assign(t.tokens.size(), 0.0f);
    t.set_merges({"h e", "t he", "\xC4\xA0 the"});
    t.finish();
    return t;
}

tokenizer tiny_spm() {
    tokenizer t;
    t.kind = tok_kind::spm;
    auto add = [&](const std::string & s, float score, int type) {
        t.tokens.push_back(s);
        t.scores.push_back(score);
        t.types.push_back(type);
    };
    add("<unk>", 0, TOK_UNKNOWN);
    add("<s>", 0, TOK_CONTROL);
    add("</s>", 0, TOK_CONTROL);
    for (int b = 0; b < 256; ++b) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        add(n, 0, TOK_BYTE);
    }
    // ids 259..
    add("\xE2\x96\x81", -1, TOK_NORMAL);               // 259 ▁
    add("h", -2, TOK_NORMAL);                          // 260
    add("e", -2, TOK_NORMAL);                          // 261
    add("l", -2, TOK_NORMAL);                          // 262
    add("o", -2, TOK_NORMAL);                          // 263
    add("\xE2\x96\x81h", -1.5f, TOK_NORMAL);           // 264 ▁h
    add("ll", -1.0f, TOK_NORMAL);                      // 265
    add("\xE2\x96\x81he", -0.9f, TOK_NORMAL);          // 266 ▁he
    add("\xE2\x96\x81hell", -0.5f, TOK_NORMAL);        // 267 ▁hell
    add("\xE2\x96\x81hello", -0.1f, TOK_NORMAL);       // 268 ▁hello
    t.unk = 0;
    t.bos = 1;
    t.eos = 2;
    t.add_bos = true;
    t.finish();
    return t;
}

} // namespace

TEST_CASE("tokenizer: GPT-2 pre-tokenizer splits like the GPT-2 pattern", "[tokenizer]") {
    const std::vector<std::string> want = {"Hello", " world", "'s", " ", " test", " 123", "!!", "\n", "\n", "abc", " \t"};
    CHECK(gpt2_pretokenize("Hello world's  test 123!!\n\nabc \t") == want);
    const std::vector<std::string> want2 = {"I", "'ll", " do", " it", "'re", " 3", ".", "14", " caf\xC3\xA9"};
    CHECK(gpt2_pretokenize("I'll do it're 3.14 caf\xC3\xA9") == want2);
}

// Regression (issue 13): every non-ASCII code point counted as a letter, so punctuation
// and symbols such as … — ™ split away from the punctuation next to them and joined words.
TEST_CASE("tokenizer: GPT-2 pre-tokenizer classes non-ASCII punctuation and symbols by Unicode", "[tokenizer]") {
    const std::vector<std::string> want = {"Wait", "\xE2\x80\xA6", " what", "?!", " \xE2\x80\x94", "a", " bargain", "\xE2\x84\xA2!"};
    CHECK(gpt2_pretokenize("Wait\xE2\x80\xA6 what?! \xE2\x80\x94" "a bargain\xE2\x84\xA2!") == want);
    // Arabic-Indic digits are numbers, a combining accent no letter
    const std::vector<std::string> want2 = {"x", " \xD9\xA3\xD9\xA4", " e", "\xCC\x81"};
    CHECK(gpt2_pretokenize("x \xD9\xA3\xD9\xA4 e\xCC\x81") == want2);
}

TEST_CASE("tokenizer: Llama 3 pre-tokenizer pieces, checked by hand", "[tokenizer]") {
    const pretokenizer & l3 = *find_pretokenizer("llama-bpe");
    // case-insensitive contractions, digits by three, one non-letter before letters, newline runs
    const std::vector<std::string> want = {"I", "'M", " ", "123", "45", " (", "n", "\n\n", " ", " x", " f", "(n", ")"};
    CHECK(pretokenize(l3, "I'M 12345 (n\n\n  x f(n)") == want);
    // Qwen2: the same pattern with single digits
    const std::vector<std::string> want_q = {"1", "2", "3", "4"};
    CHECK(pretokenize(*find_pretokenizer("qwen2"), "1234") == want_q);
}

TEST_CASE("tokenizer: GPT-2 byte-level BPE on a fixed vocabulary", "[tokenizer]") {
    const tokenizer t = tiny_gpt2();
    CHECK(t.encode("the the", false) == std::vector<int32_t>{257, 258});
    // "hen": h e -> he, then n; " x": Ġ (byte 32 -> id 32) + x (id 120)
    CHECK(t.encode("hen x", false) == std::vector<int32_t>{256, 'n', 32, 'x'});
    // byte 0x0A maps to Ċ, still id 10
    CHECK(t.encode("\n", false) == std::vector<int32_t>{10});
    for (const char * s : {"the the", "hello\n\nworld  ", "caf\xC3\xA9 \xE2\x82\xAC 12", "", "   ", "a\tb\r\n"}) {
        INFO(s);
        CHECK(t.decode(t.encode(s, false)) == s);
    }
}

// A merge whose result the vocabulary lacks still merges (llama.cpp's order of merges
// depends on it); the unknown symbol then falls back to its bytes' tokens, none dropped.
TEST_CASE("tokenizer: BPE falls back to byte tokens for a merge missing from the vocabulary", "[tokenizer]") {
    tokenizer t = tiny_gpt2();
    t.set_merges({"\xC3\x83 \xC2\xA9", "x y"});  // "Ã ©" (the bytes of "é") and "x y": no such tokens
    t.finish();
    CHECK(t.encode("\xC3\xA9", false) == std::vector<int32_t>{0xC3, 0xA9});
    CHECK(t.encode("xy", false) == std::vector<int32_t>{'x', 'y'});
    CHECK(t.decode(t.encode("caf\xC3\xA9 xy", false)) == "caf\xC3\xA9 xy");
}

TEST_CASE("tokenizer: the built-in byte-level BPE vocabulary round-trips", "[tokenizer]") {
    tokenizer t;
    std::vector<std::string> merges;
    build_builtin_gpt2_vocab(300, t, merges);
    CHECK(merges.size() >= 100);
    CHECK(t.n_vocab() > 256 + 100);
    CHECK(t.tokens.back() == "<|endoftext|>");
    const std::string text = builtin_text();
    const std::vector<int32_t> ids = t.encode(text, false);
    CHECK(ids.size() < text.size() / 2);  // the merges compress their own training text
    CHECK(t.decode(ids) == text);
    for (const char * s : {"Once upon a time", "\xF0\x9F\x98\x80 emoji", "x\n\n\ny", "UPPER lower 0123456789"}) {
        INFO(s);
        CHECK(t.decode(t.encode(s, false)) == s);
    }
}

TEST_CASE("tokenizer: SentencePiece-style BPE on a fixed vocabulary", "[tokenizer]") {
    const tokenizer t = tiny_spm();
    CHECK(t.encode("hello", true) == std::vector<int32_t>{1, 268});
    CHECK(t.encode("hello hello", false) == std::vector<int32_t>{268, 268});
    // "hellx": ▁hell + x (byte fallback <0x78> = 3 + 0x78)
    CHECK(t.encode("hellx", false) == std::vector<int32_t>{267, 3 + 0x78});
    // "oh": ▁ then o, h (no merge applies)
    CHECK(t.encode("oh", false) == std::vector<int32_t>{259, 263, 260});
    // é is not in the vocabulary: two byte tokens
    CHECK(t.encode("\xC3\xA9", false) == std::vector<int32_t>{259, 3 + 0xC3, 3 + 0xA9});
    for (const char * s : {"hello", "hello  hellx", "\xC3\xA9t\xC3\xA9", "oh hello there"}) {
        INFO(s);
        CHECK(t.decode(t.encode(s, true)) == s);
    }
}

// Regression (found by tokenizer_fuzz): without a U+2581 token, the spaces fell back to
// that character's three bytes and decoded as it, not as spaces.
TEST_CASE("tokenizer: SPM byte fallback of a space is the space's byte", "[tokenizer]") {
    tokenizer t;
    t.kind = tok_kind::spm;
    for (int b = 0; b < 256; ++b) {
        char n[8];
        snprintf(n, sizeof n, "<0x%02X>", b);
        t.tokens.push_back(n);
        t.types.push_back(TOK_BYTE);
    }
    t.tokens.push_back("hi");  // 256
    t.types.push_back(TOK_NORMAL);
    t.scores.assign(t.tokens.size(), 0.0f);
    t.finish();
    CHECK(t.encode("hi hi", false) == std::vector<int32_t>{0x20, 256, 0x20, 256});
    // found next: a stray lead byte took the first byte of the next U+2581 as its own
    CHECK(t.encode("\xCD hi", false) == std::vector<int32_t>{0x20, 0xCD, 0x20, 256});
    for (const char * s : {"hi hi", " hi  x", "", "  ", "x\xE2\x82\xAC y", "\xCD hi", "\xE2\x82 \xF0"}) {
        INFO(s);
        CHECK(t.decode(t.encode(s, false)) == s);
    }
}

TEST_CASE("tokenizer: metadata round trip through GGUF", "[tokenizer]") {
    const char * dir = getenv("TMPDIR");
    const std::string path = std::string(dir ? dir : "/tmp") + "/tsr_tok_" + std::to_string((long) getpid()) + ".gguf";
    tokenizer a;
    std::vector<std::string> merges;
    build_builtin_gpt2_vocab(100, a, merges);
    for (int kind = 0; kind < 2; ++kind) {
        if (kind == 1) {
            build_builtin_spm_vocab(200, a);
            merges.clear();
        }
        tsr_gguf_context * w = tsr_gguf_init_empty();
        REQUIRE(a.save(w, merges));
        REQUIRE(tsr_gguf_write_to_file(w, path.c_str(), true));
        tsr_gguf_free(w);
        tsr_gguf_init_params ip = {true, nullptr};
        tsr_gguf_context * g = tsr_gguf_init_from_file(path.c_str(), ip);
        REQUIRE(g);
        tokenizer b;
        std::string err;
        REQUIRE(b.load(g, err));
        CHECK(b.kind == a.kind);
        CHECK(b.tokens == a.tokens);
        CHECK(b.bos == a.bos);
        CHECK(b.eos == a.eos);
        CHECK(b.add_bos == a.add_bos);
        const std::string text = "The quick brown fox, once upon a time: caf\xC3\xA9!";
        CHECK(b.encode(text, true) == a.encode(text, true));
        CHECK(b.decode(b.encode(text, true)) == text);
        tsr_gguf_free(g);
    }
    remove(path.c_str());
}

TEST_CASE("tokenizer: an empty vocabulary is refused naming tokenizer.ggml.tokens", "[tokenizer]") {
    for (const char * model : {"gpt2", "llama"}) {
        INFO(model);
        tsr_gguf_context * g = tsr_gguf_init_empty();
        REQUIRE(g);
        const char * none[1] = {""};
        REQUIRE(tsr_gguf_set_val_str(g, "tokenizer.ggml.model", model));
        REQUIRE(tsr_gguf_set_arr_str(g, "tokenizer.ggml.tokens", none, 0));
        REQUIRE(tsr_gguf_set_arr_str(g, "tokenizer.ggml.merges", none, 0));
        tokenizer t;
        std::string err;
        CHECK_FALSE(t.load(g, err));
        CHECK(err.find("tokenizer.ggml.tokens") != std::string::npos);
        CHECK(err.find("empty") != std::string::npos);
        tsr_gguf_free(g);
    }
}

TEST_CASE("tokenizer: a model file with an empty vocabulary fails to load with the tokenizer's message", "[tokenizer]") {
    const char * dir = getenv("TMPDIR");
    const std::string path = std::string(dir ? dir : "/tmp") + "/tsr_empty_vocab_" + std::to_string((long) getpid()) + ".gguf";
    hparams hp = demo_hparams();
    hp.n_layer = 1;
    hp.n_embd = 8;
    hp.n_head = hp.n_head_kv = 2;
    hp.n_ff = 16;
    hp.n_ctx = 8;
    tokenizer empty;
    empty.kind = tok_kind::spm;
    std::string err;
    REQUIRE(write_random_model(path.c_str(), hp, empty, {}, TSR_TYPE_F32, true, 1, err));
    tsr_backend_t cpu = make_backend("cpu", 0, 1, err);
    REQUIRE(cpu);
    model m;
    CHECK_FALSE(load_model(path.c_str(), cpu, m, nullptr, nullptr, err));
    CHECK(err.find("tokenizer.ggml.tokens") != std::string::npos);
    m.release();
    tsr_backend_free(cpu);
    remove(path.c_str());
}

// ---- real vocabularies against llama.cpp ------------------------------------------------------
// tests/run/data: GPT-2's and Llama 3's vocabularies as vocabulary-only GGUF files
// (scripts/gen-tokenizer-vocabs.mjs), a corpus of many scripts and shapes of text, and the
// ids llama.cpp's own tokenizer gives each case of it under each pre-tokenizer name
// (scripts/gen-tokenizer-refs.mjs: node-llama-cpp, run once; the test needs neither).
namespace {

std::string data_file(const std::string & name) { return std::string(TSR_RUN_TEST_DATA) + "/" + name; }

std::string read_text(const std::string & path) {
    FILE * f = fopen(path.c_str(), "rb");
    REQUIRE(f);
    std::string s;
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    fclose(f);
    return s;
}

std::vector<std::string> split_lines(const std::string & s) {
    std::vector<std::string> lines;
    size_t pos = 0;
    for (size_t nl; (nl = s.find('\n', pos)) != std::string::npos; pos = nl + 1) lines.push_back(s.substr(pos, nl - pos));
    return lines;
}

// "@esc " lines: \n \r \t \\ \uXXXX, as gen-tokenizer-refs.mjs reads them
std::string unescape_case(const std::string & line) {
    if (line.compare(0, 5, "@esc ") != 0) return line;
    std::string s;
    for (size_t i = 5; i < line.size(); ++i) {
        if (line[i] != '\\' || i + 1 >= line.size()) { s += line[i]; continue; }
        const char e = line[++i];
        if (e == 'u') { s += cp_to_utf8((uint32_t) strtoul(line.substr(i + 1, 4).c_str(), nullptr, 16)); i += 4; }
        else s += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
    }
    return s;
}

// every line, then every run of 8 lines joined by newlines
const std::vector<std::string> & corpus_cases() {
    static const std::vector<std::string> cases = [] {
        const std::vector<std::string> lines = split_lines(read_text(data_file("tokenizer-corpus.txt")));
        std::vector<std::string> c;
        for (const std::string & l : lines) c.push_back(unescape_case(l));
        for (size_t i = 0; i + 8 <= lines.size(); i += 8) {
            std::string block = c[i];
            for (size_t k = 1; k < 8; ++k) block += "\n" + c[i + k];
            c.push_back(block);
        }
        return c;
    }();
    return cases;
}

struct ref_section {
    std::string pre;
    bool special = false;
    std::vector<std::vector<int32_t>> ids;  // one per corpus case
};

std::vector<ref_section> read_refs(const std::string & vocab) {
    std::vector<ref_section> out;
    for (const std::string & line : split_lines(read_text(data_file("tokenizer-refs-" + vocab + ".txt")))) {
        if (line.compare(0, 1, "#") == 0) continue;
        if (line.compare(0, 4, "pre ") == 0) {
            ref_section r;
            r.pre = line.substr(4, line.find(' ', 4) - 4);
            r.special = line.back() == '1';
            out.push_back(r);
            continue;
        }
        std::vector<int32_t> ids;
        for (const char * p = line.c_str(); *p;) {
            char * end = nullptr;
            ids.push_back((int32_t) strtol(p, &end, 10));
            p = *end ? end + 1 : end;
        }
        REQUIRE(!out.empty());
        out.back().ids.push_back(ids);
    }
    return out;
}

// The vocabulary file's metadata, open for the test to change keys before loading.
struct vocab_file {
    tsr_gguf_context * g = nullptr;
    explicit vocab_file(const std::string & vocab) {
        tsr_gguf_init_params ip = {true, nullptr};
        g = tsr_gguf_init_from_file(data_file("vocab-" + vocab + ".gguf").c_str(), ip);
        REQUIRE(g);
    }
    ~vocab_file() { tsr_gguf_free(g); }
    tokenizer load() const {
        tokenizer t;
        std::string err;
        INFO(err);
        REQUIRE(t.load(g, err));
        return t;
    }
};

// loaded once for all tests (Llama 3's takes a while under the sanitizers)
tokenizer & real_vocab(const std::string & vocab) {
    static std::unordered_map<std::string, tokenizer> loaded;
    auto it = loaded.find(vocab);
    if (it == loaded.end()) it = loaded.emplace(vocab, vocab_file(vocab).load()).first;
    return it->second;
}

std::string ids_text(const std::vector<int32_t> & ids) {
    std::string s;
    for (int32_t id : ids) s += std::to_string(id) + " ";
    return s;
}

} // namespace

TEST_CASE("tokenizer: every pre-tokenizer gives llama.cpp's ids on the corpus", "[tokenizer][real]") {
    const std::vector<std::string> & cases = corpus_cases();
    for (const char * vocab : {"gpt2", "llama3"}) {
        tokenizer & t = real_vocab(vocab);
        for (const ref_section & ref : read_refs(vocab)) {
            INFO(vocab << " pre " << ref.pre << " special " << ref.special);
            REQUIRE(ref.ids.size() == cases.size());
            std::string err;
            REQUIRE(t.set_pre(ref.pre, err));
            size_t differ = 0;
            for (size_t i = 0; i < cases.size(); ++i) {
                const std::vector<int32_t> ids = t.encode(cases[i], false, ref.special);
                if (ids == ref.ids[i] || ++differ > 3) continue;  // the first few differences in full
                INFO("case " << i << ": '" << cases[i] << "'\n  got  " << ids_text(ids) << "\n  want " << ids_text(ref.ids[i]));
                CHECK(ids == ref.ids[i]);
            }
            CHECK(differ == 0);
        }
        std::string err;
        REQUIRE(t.set_pre(vocab == std::string("gpt2") ? "gpt-2" : "llama-bpe", err));  // as the file says
    }
}

TEST_CASE("tokenizer: decode(encode(x)) == x on the corpus with both real vocabularies", "[tokenizer][real]") {
    for (const char * vocab : {"gpt2", "llama3"}) {
        const tokenizer & t = real_vocab(vocab);
        for (const std::string & text : corpus_cases()) {
            INFO(vocab << ": '" << text << "'");
            CHECK(t.decode(t.encode(text, false)) == text);
        }
        // bytes that are no UTF-8 come back too
        const std::string raw = "a\xFF\xC3 b\x80\xE2\x82";
        CHECK(t.decode(t.encode(raw, false)) == raw);
    }
}

TEST_CASE("tokenizer: an unknown tokenizer.ggml.pre is refused naming it", "[tokenizer]") {
    vocab_file f("gpt2");
    REQUIRE(tsr_gguf_set_val_str(f.g, "tokenizer.ggml.pre", "no-such-splitter"));
    tokenizer t;
    std::string err;
    CHECK_FALSE(t.load(f.g, err));
    CHECK(err.find("'no-such-splitter'") != std::string::npos);
    CHECK(err.find("llama-bpe") != std::string::npos);  // and says what is known
    CHECK_FALSE(t.set_pre("llama-3-typo", err));
    CHECK(err.find("'llama-3-typo'") != std::string::npos);
}

TEST_CASE("tokenizer: add_bos_token and add_eos_token come from the file", "[tokenizer]") {
    // Llama 3's file asks for BOS (128000 <|begin_of_text|>): "Hello" is 9906
    CHECK(real_vocab("llama3").encode("Hello", true) == std::vector<int32_t>{128000, 9906});
    CHECK(real_vocab("llama3").encode("Hello", false) == std::vector<int32_t>{9906});
    // GPT-2's does not; with both keys set, <|endoftext|> (50256) goes at both ends
    CHECK(real_vocab("gpt2").encode("Hello", true) == std::vector<int32_t>{15496});
    vocab_file f("gpt2");
    REQUIRE(tsr_gguf_set_val_bool(f.g, "tokenizer.ggml.add_bos_token", true));
    REQUIRE(tsr_gguf_set_val_bool(f.g, "tokenizer.ggml.add_eos_token", true));
    CHECK(f.load().encode("Hello", true) == std::vector<int32_t>{50256, 15496, 50256});
}

TEST_CASE("tokenizer: control tokens in the text are recognised only when asked", "[tokenizer]") {
    const tokenizer & l3 = real_vocab("llama3");
    const std::string chat = "<|begin_of_text|>Hi<|eot_id|>";
    // <|begin_of_text|> 128000, "Hi" 13347, <|eot_id|> 128009
    CHECK(l3.encode(chat, false, true) == std::vector<int32_t>{128000, 13347, 128009});
    const std::vector<int32_t> as_text = l3.encode(chat, false, false);
    CHECK(std::find(as_text.begin(), as_text.end(), 128000) == as_text.end());
    CHECK(l3.decode(as_text) == chat);
    const tokenizer & g2 = real_vocab("gpt2");
    CHECK(g2.encode("a<|endoftext|>b", false, true) == std::vector<int32_t>{64, 50256, 65});
    CHECK(g2.encode("<|endoftext|>", false, false).size() > 1);
}

// llama.cpp's partition: user-defined tokens are always found in text, control tokens only
// with parse_special, the longest spelling first; SPM text after one gets the space prefix.
TEST_CASE("tokenizer: user-defined and control tokens in text, longest first", "[tokenizer]") {
    tokenizer t = tiny_gpt2();
    for (const char * s : {"<|im_start|>", "<|im_end|>", "<|im", "<|im_end|>x", "caf\xC3\xA9"}) t.tokens.push_back(s);  // 259..263
    t.types.assign(t.tokens.size(), TOK_NORMAL);
    t.types[259] = t.types[263] = TOK_USER;
    t.types[260] = t.types[261] = t.types[262] = TOK_CONTROL;
    t.scores.assign(t.tokens.size(), 0.0f);
    t.finish();
    // "<|im_end|>x" (262) is longer than "<|im_end|>" (260); "<|im" (261) is cut only where
    // no longer one stands
    CHECK(t.encode("<|im_start|>the<|im_end|>x<|im", false, true) == std::vector<int32_t>{259, 257, 262, 261});
    // without parse_special the user-defined token is still one token, the control ones text
    const std::vector<int32_t> plain = t.encode("<|im_start|>the<|im_end|>", false, false);
    CHECK(plain.front() == 259);
    CHECK(std::find(plain.begin(), plain.end(), 260) == plain.end());
    CHECK(t.decode(plain) == "<|im_start|>the<|im_end|>");
    // a user-defined token decodes to its spelling, not to bytes_to_unicode's bytes
    CHECK(t.encode("a caf\xC3\xA9", false) == std::vector<int32_t>{'a', ' ', 263});
    CHECK(t.decode(t.encode("a caf\xC3\xA9", false)) == "a caf\xC3\xA9");

    const tokenizer spm = tiny_spm();
    // <s> (1) parsed; "hello" after it starts a word: ▁hello (268)
    CHECK(spm.encode("<s>hello</s>", false, true) == std::vector<int32_t>{1, 268, 2});
    const std::vector<int32_t> spm_plain = spm.encode("<s>hello", false, false);
    CHECK(spm_plain.front() != 1);
    CHECK(spm.decode(spm_plain) == "<s>hello");
}

TEST_CASE("tokenizer: encoding stops once the ids pass the limit", "[tokenizer]") {
    const tokenizer & t = real_vocab("llama3");
    std::string text;
    for (int i = 0; i < 2000; ++i) text += "word" + std::to_string(i) + " ";
    const std::vector<int32_t> all = t.encode(text, true);
    std::vector<int32_t> head;
    CHECK_FALSE(t.encode(text, head, true, false, 10));
    CHECK(head == std::vector<int32_t>(all.begin(), all.begin() + 10));
    CHECK(t.encode(text, head, true, false, all.size()));
    CHECK(head == all);
    // one word of 50,000 letters: merged in O(n log n), so this is quick too
    const std::string word(50000, 'x');
    CHECK_FALSE(t.encode(word, head, false, false, 100));
    CHECK(head.size() == 100);
}

TEST_CASE("tokenizer: Unicode classes and case mapping from the generated tables", "[tokenizer]") {
    // hand-checked against the Unicode character database
    CHECK(cp_bits('a') == UCD_LETTER);
    CHECK(cp_bits(0x0663) == UCD_NUMBER);                       // ARABIC-INDIC DIGIT THREE
    CHECK(cp_bits(0x2167) == UCD_NUMBER);                       // ROMAN NUMERAL EIGHT (Nl)
    CHECK(cp_bits(0x0301) == UCD_MARK);                         // COMBINING ACUTE ACCENT
    CHECK(cp_bits(0x2026) == UCD_PUNCT);                        // HORIZONTAL ELLIPSIS
    CHECK(cp_bits(0x00A3) == UCD_SYMBOL);                       // POUND SIGN
    CHECK(cp_bits(0x2122) == UCD_SYMBOL);                       // TRADE MARK SIGN
    CHECK(cp_bits(0x300D) == UCD_PUNCT);                        // RIGHT CORNER BRACKET
    CHECK(cp_bits(0x3000) == (UCD_SEPARATOR | UCD_WHITESPACE)); // IDEOGRAPHIC SPACE
    CHECK(cp_bits('\n') == (UCD_CONTROL | UCD_WHITESPACE));
    CHECK(cp_bits(0x200D) == UCD_CONTROL);                      // ZERO WIDTH JOINER (Cf)
    CHECK(cp_bits(0x4E2D) == UCD_LETTER);                       // a CJK ideograph (a First/Last range)
    CHECK(cp_bits(0xAC00) == UCD_LETTER);                       // a Hangul syllable (a range)
    CHECK(cp_bits(0x0378) == 0);                                // unassigned
    CHECK(cp_bits(0x10FFFF) == 0);
    CHECK(cp_tolower('S') == 's');
    CHECK(cp_tolower(0x0130) == 'i');                           // LATIN CAPITAL I WITH DOT ABOVE
    CHECK(cp_tolower(0x03A3) == 0x03C3);                        // SIGMA
    CHECK(cp_tolower('s') == 's');
}
