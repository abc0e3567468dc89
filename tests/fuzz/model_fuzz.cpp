// libFuzzer target: tessera-run's whole loading path on a GGUF file - parsing, the
// hyper-parameters' range and cross checks, the tokenizer, binding and loading the weights
// into a CPU backend buffer, and the session (KV cache, graph, compute buffer plan) - all
// that runs before the first token, without generating. The seed corpus
// tests/fuzz/corpus/model/ holds small valid models and hostile variants
// (tests/fuzz/make_model_corpus.cpp writes them).
// Run with -malloc_limit_mb=64: no file of at most 64 KiB may make the loader allocate more.
//   build-fuzz/tests/fuzz/model_fuzz -max_total_time=300 -max_len=65536 -malloc_limit_mb=64 \
//       -rss_limit_mb=2048 -timeout=10 CORPUS_COPY_DIR   (seeded from tests/fuzz/corpus/model)
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"
#include "tessera-cpu.h"

#include "backends.h"
#include "graph.h"
#include "model.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace {

// The loader reads a path (tsr_gguf_load_tensors reopens it), so the input becomes an
// in-memory file whose /proc path stays valid while the descriptor is open.
struct memory_file {
    int fd = -1;
    std::string path;
    memory_file(const uint8_t * data, size_t size) {
        fd = memfd_create("model_fuzz", 0);
        if (fd < 0) return;
        size_t done = 0;
        while (done < size) {
            const ssize_t n = write(fd, data + done, size - done);
            if (n <= 0) { close(fd); fd = -1; return; }
            done += (size_t) n;
        }
        path = "/proc/self/fd/" + std::to_string(fd);
    }
    ~memory_file() { if (fd >= 0) close(fd); }
};

tsr_backend_t cpu_backend() {
    static tsr_backend_t b = [] {
        std::string err;
        tsr_backend_t be = trun::make_backend("cpu", 0, 1, err);
        if (!be) { fprintf(stderr, "model_fuzz: %s\n", err.c_str()); abort(); }
        return be;
    }();
    return b;
}

// What tessera-run does after loading and before generating: tokenize, start a session.
void start_session(const trun::model & m) {
    const std::vector<int32_t> prompt = m.tok.encode("Hello world", m.tok.add_bos);
    trun::session_params sp;
    sp.n_ctx = 16;
    sp.n_batch = 4;
    trun::session s;
    std::string err;
    (void) trun::session_init(s, m, cpu_backend(), sp, err);
    (void) prompt;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    memory_file f(data, size);
    if (f.fd < 0) return 0;
    trun::model m;
    std::string err;
    if (trun::load_model(f.path.c_str(), cpu_backend(), m, nullptr, nullptr, err)) start_session(m);
    else if (err.empty()) __builtin_trap();  // a refusal must say why
    return 0;
}
