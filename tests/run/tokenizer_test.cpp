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
