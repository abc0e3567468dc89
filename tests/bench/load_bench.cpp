// load_bench: how fast tessera-run's loader makes a model ready, and what memory it takes:
// each file in each mode (mmap: weights used in place from a read-only mapping; read: read
// into a CPU buffer) with a cold and a warm page cache, each measurement in a fresh process
// (so its peak RSS is its own). Columns: the load (load_model: metadata, tokenizer, weights)
// and the load plus the first token (which, with mmap, is when the weights are first
// touched), the process's peak RSS (VmHWM: anonymous and file pages) and its anonymous RSS
// at the end (RssAnon: mapped file pages are not anonymous). Read mode adds a second read
// of the weights into the same, now touched, buffer: the reading path's own speed, without
// the kernel's first touch of fresh anonymous pages (which can dominate in a VM).
//
// Cold cache: the file's own pages are evicted with posix_fadvise(POSIX_FADV_DONTNEED)
// (no privilege needed, other processes' caches kept), else /proc/sys/vm/drop_caches when
// writable; the cache column says which.
//
//   load_bench --write DIR            write DIR/tsr-llama1b-{f16,q8_0}.gguf (TinyLlama-1.1B
//                                     shapes, 32000 tokens, seeded random weights)
//   load_bench [--csv] [-t N] FILE... the table
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"
#include "tessera-cpu.h"

#include "backends.h"
#include "graph.h"
#include "random_model.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

using namespace trun;

static double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// ---- writing the 1.1B files ------------------------------------------------------------------

// The built-in SentencePiece vocabulary padded with unused pieces to TinyLlama's 32000
// tokens, so the embedding and output matrices have their real size.
static tokenizer tinyllama_vocab() {
    tokenizer tok;
    build_builtin_spm_vocab(200, tok);
    pad_vocab(tok, 32000);
    return tok;
}

static int write_files(const std::string & dir) {
    const tokenizer tok = tinyllama_vocab();
    for (tsr_type t : {TSR_TYPE_F16, TSR_TYPE_Q8_0}) {
        const std::string path = dir + "/tsr-llama1b-" + tsr_type_name(t) + ".gguf";
        fprintf(stderr, "load_bench: writing %s ...\n", path.c_str());
        std::string err;
        if (!write_random_model(path.c_str(), tinyllama_1b_hparams(), tok, {}, t, /*tied_output=*/false, 42, err)) {
            fprintf(stderr, "load_bench: %s: %s\n", path.c_str(), err.c_str());
            return 1;
        }
    }
    return 0;
}

// ---- one measurement (a child process) ---------------------------------------------------------

// a field of /proc/self/status in MiB (its value is in kB), -1 when absent
static double status_mib(const char * field) {
    FILE * f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    const size_t n = strlen(field);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, n) == 0 && line[n] == ':') v = atof(line + n + 1) / 1024.0;
    }
    fclose(f);
    return v;
}

// prints "load_s first_token_s vmhwm_mib rssanon_mib mapped reload_s" or "error <message>"
static int measure(const char * path, bool use_mmap, int threads) {
    std::string err;
    tsr_backend_t backend = make_backend("cpu", 0, threads, err);
    if (!backend) { printf("error %s\n", err.c_str()); return 1; }
    int rc = 0;
    {
        model m;
        const double t0 = now_s();
        if (!load_model(path, backend, m, nullptr, nullptr, err, use_mmap)) {
            printf("error %s\n", err.c_str());
            rc = 1;
        } else {
            const double t_load = now_s() - t0;
            session s;
            session_params sp;
            sp.n_ctx = 32;
            sp.n_batch = 1;
            const int32_t tok = m.tok.bos >= 0 ? m.tok.bos : 0;
            if (!session_init(s, m, backend, sp, err) || !session_eval(s, &tok, 1, err)) {
                printf("error %s\n", err.c_str());
                rc = 1;
            } else {
                const double t_first = now_s() - t0, t1 = now_s();
                const bool reloaded = !m.mapped && tsr_gguf_load_tensors(m.gguf, m.ctx_w, path, nullptr, nullptr);
                printf("%.3f %.3f %.1f %.1f %d %.3f\n", t_load, t_first, status_mib("VmHWM"), status_mib("RssAnon"), m.mapped ? 1 : 0,
                       reloaded ? now_s() - t1 : 0.0);
            }
        }
    }
    tsr_backend_free(backend);
    return rc;
}

// ---- the table -----------------------------------------------------------------------------------

// Evict the file from the page cache: "fadvise" (this file's pages only: polite on a shared
// machine) or "drop_caches" (every file's; root), "" when neither worked.
static std::string make_cold(const std::string & path) {
    sync();
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd >= 0) {
        const bool ok = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
        close(fd);
        if (ok) return "fadvise";
    }
    if (FILE * f = fopen("/proc/sys/vm/drop_caches", "w")) {
        const bool ok = fputs("3\n", f) >= 0;
        if (fclose(f) == 0 && ok) return "drop_caches";
    }
    return "";
}

static void make_warm(const std::string & path) {
    std::vector<char> buf(16u << 20);
    const int fd = open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    while (read(fd, buf.data(), buf.size()) > 0) {}
    close(fd);
}

static double gib_s(double mib, double s) { return s > 0 ? mib / 1024.0 / s : 0.0; }

struct row {
    std::string file, mode, cache;
    double size_mib = 0, load_s = 0, first_s = 0, hwm = 0, anon = 0, reload_s = 0;
    bool mapped = false;
    std::string error;
};

static row run_child(const std::string & self, const std::string & path, bool use_mmap, int threads) {
    row r;
    const std::string cmd = "'" + self + "' --child '" + path + "' " + (use_mmap ? "mmap" : "read") + " " + std::to_string(threads);
    FILE * p = popen(cmd.c_str(), "r");
    char line[1024] = {0};
    if (!p || !fgets(line, sizeof line, p)) r.error = "no output from " + cmd;
    if (p) pclose(p);
    int mapped = 0;
    if (r.error.empty() && sscanf(line, "%lf %lf %lf %lf %d %lf", &r.load_s, &r.first_s, &r.hwm, &r.anon, &mapped, &r.reload_s) != 6) r.error = line;
    r.mapped = mapped != 0;
    return r;
}

int main(int argc, char ** argv) {
    if (argc == 5 && strcmp(argv[1], "--child") == 0) return measure(argv[2], strcmp(argv[3], "mmap") == 0, atoi(argv[4]));
    if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_files(argv[2]);
    bool csv = false;
    int threads = 2;
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--csv") == 0) csv = true;
        else if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (argv[i][0] == '-') { fprintf(stderr, "usage: %s [--csv] [-t N] FILE... | --write DIR\n", argv[0]); return 2; }
        else files.push_back(argv[i]);
    }
    if (files.empty()) { fprintf(stderr, "usage: %s [--csv] [-t N] FILE... | --write DIR\n", argv[0]); return 2; }
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) { fprintf(stderr, "load_bench: cannot find its own executable\n"); return 1; }
    self[n] = 0;

    std::vector<row> rows;
    for (const std::string & f : files) {
        for (bool use_mmap : {true, false}) {
            for (bool cold : {true, false}) {
                std::string cache = "warm";
                if (cold) {
                    const std::string how = make_cold(f);
                    cache = how.empty() ? "cold (could not evict)" : "cold (" + how + ")";
                } else {
                    make_warm(f);
                }
                row r = run_child(self, f, use_mmap, threads);
                r.file = f.substr(f.find_last_of('/') + 1);
                r.mode = use_mmap ? (r.mapped ? "mmap" : "mmap refused: read") : "read";
                r.cache = cache;
                FILE * fp = fopen(f.c_str(), "rb");
                if (fp) { fseek(fp, 0, SEEK_END); r.size_mib = (double) ftell(fp) / (1024.0 * 1024.0); fclose(fp); }
                fprintf(stderr, "load_bench: %s %s %s: %s\n", r.file.c_str(), r.mode.c_str(), r.cache.c_str(), r.error.empty() ? "done" : r.error.c_str());
                rows.push_back(r);
            }
        }
    }
    if (csv) {
        printf("file,size_mib,mode,cache,load_s,load_gib_s,load_first_token_s,peak_rss_mib,anon_rss_mib,anon_pct_of_file,reread_gib_s,error\n");
        for (const row & r : rows)
            printf("%s,%.1f,%s,%s,%.3f,%.2f,%.3f,%.1f,%.1f,%.1f,%.2f,%s\n", r.file.c_str(), r.size_mib, r.mode.c_str(), r.cache.c_str(), r.load_s,
                   gib_s(r.size_mib, r.load_s), r.first_s, r.hwm, r.anon, 100.0 * r.anon / r.size_mib, gib_s(r.size_mib, r.reload_s), r.error.c_str());
        return 0;
    }
    printf("| file | size MiB | mode | cache | load s | GiB/s | load + 1st token s | peak RSS MiB (VmHWM) | anon RSS MiB (RssAnon) | anon / file | re-read into the touched buffer GiB/s |\n");
    printf("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const row & r : rows) {
        if (!r.error.empty()) { printf("| %s | %.1f | %s | %s | error: %s ||||||\n", r.file.c_str(), r.size_mib, r.mode.c_str(), r.cache.c_str(), r.error.c_str()); continue; }
        const std::string reread = r.reload_s > 0 ? std::to_string(gib_s(r.size_mib, r.reload_s)).substr(0, 5) : "-";
        printf("| %s | %.1f | %s | %s | %.3f | %.2f | %.3f | %.1f | %.1f | %.1f %% | %s |\n", r.file.c_str(), r.size_mib, r.mode.c_str(), r.cache.c_str(),
               r.load_s, gib_s(r.size_mib, r.load_s), r.first_s, r.hwm, r.anon, 100.0 * r.anon / r.size_mib, reread.c_str());
    }
    return 0;
}
