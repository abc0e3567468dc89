// tokenizer_bench: the runner's byte-level BPE tokenizer (examples/run/tokenizer.h) on the
// real GPT-2 and Llama 3 vocabularies of tests/run/data: load time, then MB/s and tokens/s
// on prompts of about 1 MB (prose and code repeated, as a long document is; and words that
// never repeat, so the piece cache never helps) and on one 130 KB word (the case that was
// quadratic). One thread; the times are CPU seconds of the process (std::clock), so a busy
// machine does not inflate them. One Markdown table; --csv prints CSV rows. The committed
// Llama 3 file keeps only the merges the tests' texts use: for its real speed, make the full
// one with TSR_ALL_MERGES=1 node scripts/gen-tokenizer-vocabs.mjs NODE_MODULES DIR and pass
// --data DIR (with tokenizer-corpus.txt copied there).
//
//   tokenizer_bench [--csv] [--data DIR]
#include "tessera/gguf.h"

#include "tokenizer.h"

#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

using namespace trun;

static double now_s() { return (double) std::clock() / CLOCKS_PER_SEC; }

static std::string read_text(const std::string & path) {
    std::string s;
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) return s;
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
    fclose(f);
    return s;
}

// Words no vocabulary caches twice: letters from a fixed LCG, 3..10 long.
static std::string unique_words(size_t bytes) {
    std::string s;
    uint64_t x = 12345;
    while (s.size() < bytes) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const int n = 3 + (int) ((x >> 33) % 8);
        s += ' ';
        for (int i = 0; i < n; ++i) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            s += (char) ('a' + (x >> 33) % 26);
        }
    }
    return s;
}

int main(int argc, char ** argv) {
    bool csv = false;
    std::string dir = TSR_RUN_TEST_DATA;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--csv")) csv = true;
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) dir = argv[++i];
        else { fprintf(stderr, "usage: %s [--csv] [--data DIR]\n", argv[0]); return 2; }
    }
    const std::string corpus = read_text(dir + "/tokenizer-corpus.txt");
    if (corpus.empty()) { fprintf(stderr, "tokenizer_bench: no %s/tokenizer-corpus.txt\n", dir.c_str()); return 1; }
    std::string doc;
    while (doc.size() < (1u << 20)) doc += corpus;
    const std::vector<std::pair<const char *, std::string>> inputs = {
        {"1 MB corpus text", doc}, {"1 MB unique words", unique_words(1u << 20)}, {"one 130 KB word", std::string(130000, 'a')}};

    if (csv) printf("vocab,pre,load_cpu_s,input,bytes,tokens,cpu_s,mb_per_s\n");
    else printf("| vocabulary | pre | load (CPU s) | input | bytes | tokens | CPU s | MB/s |\n|---|---|---:|---|---:|---:|---:|---:|\n");
    for (const char * vocab : {"gpt2", "llama3"}) {
        const double t0 = now_s();
        tsr_gguf_init_params ip = {true, nullptr};
        tsr_gguf_context * g = tsr_gguf_init_from_file((dir + "/vocab-" + vocab + ".gguf").c_str(), ip);
        tokenizer tok;
        std::string err;
        if (!g || !tok.load(g, err)) { fprintf(stderr, "tokenizer_bench: %s: %s\n", vocab, err.c_str()); return 1; }
        tsr_gguf_free(g);
        const double t_load = now_s() - t0;
        for (const auto & in : inputs) {
            tokenizer fresh = tok;  // an empty piece cache for every input
            const double t1 = now_s();
            const std::vector<int32_t> ids = fresh.encode(in.second, false);
            const double dt = now_s() - t1;
            const double mbs = (double) in.second.size() / 1e6 / dt;
            if (csv) printf("%s,%s,%.3f,%s,%zu,%zu,%.4f,%.2f\n", vocab, tok.pre->name, t_load, in.first, in.second.size(), ids.size(), dt, mbs);
            else printf("| %s | %s | %.3f | %s | %zu | %zu | %.4f | %.2f |\n", vocab, tok.pre->name, t_load, in.first, in.second.size(), ids.size(), dt, mbs);
        }
    }
    return 0;
}
