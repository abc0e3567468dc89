// tessera-run: load a GPT-2 or LLaMA-family GGUF model and generate text.
//
//   tessera-run -m model.gguf -p "prompt" -n 64 [--backend cpu|vulkan|cuda] [-ngl N] [-t threads]
//               [--temp T --top-k K --top-p P --seed S] [--special] [--verbose-prompt] [--no-mmap] [--no-repack]
//
// Without -m it builds a small GPT-2 with seeded random weights, writes it to a temporary
// GGUF file and runs it through the same loading path (the text is gibberish: the point
// is the machinery).
#include "args.h"
#include "backends.h"
#include "graph.h"
#include "progress.h"
#include "random_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#ifdef _WIN32
#include <process.h>
#define TRUN_GETPID _getpid
#else
#include <unistd.h>
#define TRUN_GETPID getpid
#endif

using namespace trun;

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double mib(size_t b) { return (double) b / (1024.0 * 1024.0); }

static int fail(const std::string & msg) {
    fprintf(stderr, "tessera-run: error: %s\n", msg.c_str());
    return 1;
}

// Without -c: the model's context, at most 4096 tokens, and at most as many as keep the KV
// cache within the size of the model file (at least 16 MiB): a file of many tiny layers
// must not get a cache many times its size.
static int default_context(const model & m, tsr_type kv_type) {
    const hparams & hp = m.hp;
    const uint64_t per_token = 2ull * (uint64_t) hp.n_layer * (uint64_t) hp.n_embd_gqa() * tsr_type_size(kv_type);
    const uint64_t fit = std::max<uint64_t>(1, std::max<uint64_t>(m.file_size, 16ull << 20) / per_token);
    const int n_ctx = (int) std::min<uint64_t>({(uint64_t) hp.n_ctx, 4096, fit});
    if (n_ctx < std::min(hp.n_ctx, 4096)) {
        fprintf(stderr, "tessera-run: context %d tokens: a longer one's KV cache would outgrow the model file (set it with -c)\n", n_ctx);
    }
    return n_ctx;
}

// --verbose-prompt: one line per token, its id and its text (escaped), like llama.cpp's
static void print_prompt_tokens(const tokenizer & tok, const std::vector<int32_t> & ids) {
    for (int32_t id : ids) {
        const bool control = id >= 0 && id < tok.n_vocab() && tok.types[(size_t) id] == TOK_CONTROL;
        const std::string text = control ? tok.tokens[(size_t) id] : tok.piece(id);
        std::string shown;
        for (unsigned char c : text) {
            char esc[8];
            if (c == '\n') shown += "\\n";
            else if (c == '\t') shown += "\\t";
            else if (c == '\r') shown += "\\r";
            else if (c < 0x20 || c == 0x7F) { snprintf(esc, sizeof esc, "\\x%02X", c); shown += esc; }
            else shown += (char) c;
        }
        fprintf(stderr, "%8d -> '%s'\n", id, shown.c_str());
    }
}

// Where the weights came from, for the summary: mapped in place, or read (and why not mapped).
static std::string weights_origin(const model & m, bool mmap_asked, double read_mib_s) {
    if (m.mapped) return "mmap: used in place from a read-only mapping of the file";
    char rate[64];
    snprintf(rate, sizeof rate, "read into memory at %.1f MiB/s", read_mib_s);
    return std::string(rate) + (mmap_asked ? "; not mapped: " + m.not_mapped_why : ", --no-mmap");
}

static std::string temp_path() {
    const char * dir = getenv("TMPDIR");
#ifdef _WIN32
    if (!dir) dir = getenv("TEMP");
    if (!dir) dir = ".";
#else
    if (!dir) dir = "/tmp";
#endif
    return std::string(dir) + "/tessera-run-demo-" + std::to_string((long) TRUN_GETPID()) + ".gguf";
}

// Where the memory went, per backend: weights, KV cache, the compute buffer against its
// lower bound, the workspace; then how the scheduler cut the last (one-token) graph.
static void print_summary(const model & m, const session & s, const std::string & origin) {
    fprintf(stderr, "\ntessera-run: summary (%s)\n", m.on_gpu() ? "GPU + CPU" : "CPU backend");
    for (size_t i = 0; i < m.backends.size(); ++i) {
        const bool main_be = i == 0;
        const size_t w = tsr_backend_buffer_get_size(main_be ? m.buf_w : m.buf_w_cpu);
        const size_t kv = tsr_backend_buffer_get_size(main_be ? s.buf_kv : s.buf_kv_cpu);
        const tsr_backend_sched_buffer_info & c = s.compute[i];
        fprintf(stderr, "  %s\n", tsr_backend_name(m.backends[i]));
        fprintf(stderr, "    weights buffer : %10.2f MiB%s\n", mib(w), main_be ? ("  (" + origin + ")").c_str() : "");
        if (main_be && m.buf_w_repack)
            fprintf(stderr, "    CPU_REPACK     : %10.2f MiB  (the interleaved types' matrices read from the mapping, 8 rows interleaved)\n",
                    mib(tsr_backend_buffer_get_size(m.buf_w_repack)));
        fprintf(stderr, "    KV cache buffer: %10.2f MiB  (%d x %s)\n", mib(kv), s.n_ctx, tsr_type_name(s.sp.kv_type));
        fprintf(stderr, "    compute buffer : %10.2f MiB  (lower bound %.2f MiB, ratio %.3f; input copies %.2f MiB)\n", mib(c.buffer_size),
                mib(c.lower_bound), c.lower_bound ? (double) c.planned_size / (double) c.lower_bound : 0.0, mib(c.input_bytes));
        fprintf(stderr, "    workspace      : %10.2f MiB\n", mib(tsr_backend_get_workspace_size(m.backends[i])));
    }
    fprintf(stderr, "  graph            : %d nodes, attention: %s\n", s.n_graph_nodes,
            s.sp.flash_attn ? "flash_attn_ext" : "mul_mat + soft_max_ext");
    fprintf(stderr, "  per token        : %d splits, %d input copies\n", s.n_splits, s.n_split_inputs);
}

static int run(int argc, char ** argv) {
    run_args a;
    std::string err;
    if (!parse_args(argc, argv, a, err)) return fail(err + " (see --help)");
    if (a.show_help) { print_usage(argv[0]); return 0; }
    if (a.list_devices) { list_devices(stdout); return 0; }
    // Vulkan without --device: the default device (TSR_VULKAN_DEVICE, else the best GPU)
    if (a.backend == "vulkan" && !a.device_given) a.device = -1;
    if (a.backend == "cuda" && a.device < 0) return fail("--device -1: give the CUDA device index (see --help)");

    tsr_backend_t backend = make_backend(a.backend, a.device, a.threads, err);
    if (!backend) return fail(err);
    if (tsr_backend_is_cpu(backend) && a.n_gpu_layers >= 0) fprintf(stderr, "tessera-run: -ngl has no effect on the CPU backend\n");
    // next to a GPU, a CPU backend for the layers it does not get and the ops it lacks
    tsr_backend_t cpu = nullptr;
    if (!tsr_backend_is_cpu(backend) && !(cpu = make_backend("cpu", 0, a.threads, err))) {
        tsr_backend_free(backend);
        return fail(err);
    }
    auto free_backends = [&]() {
        tsr_backend_free(backend);
        tsr_backend_free(cpu);
    };

    // the embedded demo model
    std::string path = a.model, demo_path;
    if (path.empty()) {
        tokenizer tok;
        std::vector<std::string> merges;
        build_builtin_gpt2_vocab(300, tok, merges);
        const hparams hp = demo_hparams();
        const uint64_t seed = 1234;
        demo_path = path = temp_path();
        fprintf(stderr,
                "tessera-run: no -m given: building a random GPT-2 (%d layers, %d wide, %d heads, vocab %d from a built-in\n"
                "             byte-level BPE, weight seed %llu), writing it to %s and loading it back.\n"
                "             Its weights are random, so expect gibberish. Run a real model with -m model.gguf.\n",
                hp.n_layer, hp.n_embd, hp.n_head, tok.n_vocab(), (unsigned long long) seed, path.c_str());
        if (!write_random_model(path.c_str(), hp, tok, merges, TSR_TYPE_F32, /*tied_output=*/false, seed, err)) {
            free_backends();
            return fail("writing the demo model: " + err);
        }
    }

    int rc = 0;
    {
        model m;
        progress prog;
        fprintf(stderr, "tessera-run: loading %s on %s\n", path.c_str(), tsr_backend_name(backend));
        placement pl;
        pl.main = backend;
        pl.cpu = cpu;
        pl.n_gpu_layers = a.n_gpu_layers;
        pl.repack = a.repack;
        if (!load_model(path.c_str(), pl, m, progress::callback, &prog, err, a.use_mmap)) {
            rc = fail("loading " + path + ": " + err);
        } else {
            const hparams & hp = m.hp;
            fprintf(stderr, "tessera-run: %s, %d layers, n_embd %d, %d heads (%d kv), n_ff %d, vocab %d, context %d, %s tokenizer\n",
                    arch_name(hp.a), hp.n_layer, hp.n_embd, hp.n_head, hp.n_head_kv, hp.n_ff, hp.n_vocab, hp.n_ctx,
                    m.tok.kind == tok_kind::gpt2 ? ("gpt2 BPE (pre-tokenizer " + std::string(m.tok.pre->name) + ")").c_str() : "llama SPM");
            if (hp.is_moe()) fprintf(stderr, "tessera-run: %d experts, %d used per token, n_ff %d each\n", hp.n_expert, hp.n_expert_used, hp.ff_exp());
            const size_t weight_bytes = tsr_backend_buffer_get_size(m.buf_w) + tsr_backend_buffer_get_size(m.buf_w_cpu);
            const double load_mib_s = prog.seconds > 0 ? mib(weight_bytes) / prog.seconds : 0.0;
            if (m.on_gpu()) fprintf(stderr, "tessera-run: %d of %d layers on %s\n", m.n_gpu_layers, hp.n_layer, tsr_backend_name(backend));

            session_params sp;
            sp.kv_type = a.kv_type == "f32" ? TSR_TYPE_F32 : TSR_TYPE_F16;
            sp.n_ctx = a.n_ctx > 0 ? a.n_ctx : default_context(m, sp.kv_type);
            sp.flash_attn = a.flash_attn;
            // tokenizing stops once the prompt cannot fit: a huge prompt is refused at once
            const size_t room = (size_t) std::max<int64_t>(0, (int64_t) sp.n_ctx - a.n_predict);
            std::vector<int32_t> prompt;
            const bool prompt_fits = m.tok.encode(a.prompt, prompt, /*add_special=*/true, a.parse_special, room);
            if (prompt.empty()) prompt.push_back(m.tok.bos >= 0 ? m.tok.bos : 0);
            sp.n_batch = std::min(a.n_batch, std::max(1, (int) prompt.size()));
            session s;
            if (a.n_ctx > hp.n_ctx) {
                rc = fail("-c " + std::to_string(a.n_ctx) + " exceeds the model's context of " + std::to_string(hp.n_ctx));
            } else if (!prompt_fits || (int64_t) prompt.size() + (int64_t) a.n_predict > (int64_t) sp.n_ctx) {
                rc = fail("prompt (" + std::string(prompt_fits ? "" : "more than ") + std::to_string(prompt.size()) + " tokens) + " +
                          std::to_string(a.n_predict) + " tokens to generate exceed the context of " + std::to_string(sp.n_ctx));
            } else if (!session_init(s, m, backend, sp, err)) {
                rc = fail(err);
            } else {
                // prompt
                fprintf(stderr, "tessera-run: prompt: %zu tokens\n", prompt.size());
                if (a.verbose_prompt) print_prompt_tokens(m.tok, prompt);
                fprintf(stderr, "\n");
                bool first_piece = true;
                auto emit = [&](int32_t id) {
                    std::string p = m.tok.piece(id);
                    if (first_piece && !p.empty() && m.tok.kind == tok_kind::spm && m.tok.add_space_prefix && p[0] == ' ') p.erase(0, 1);
                    if (!p.empty()) first_piece = false;
                    fwrite(p.data(), 1, p.size(), stdout);
                    fflush(stdout);
                };
                for (int32_t id : prompt) emit(id);
                const double t0 = now_s();
                if (!session_eval(s, prompt.data(), (int) prompt.size(), err)) rc = fail(err);
                const double t_prompt = now_s() - t0;
                // generation
                sampler smp(a.samp);
                int n_gen = 0;
                double t_gen = 0.0;
                while (rc == 0 && n_gen < a.n_predict) {
                    const int32_t id = smp.sample(s.logits.data(), hp.n_vocab);
                    if (id == m.tok.eos && m.tok.eos >= 0) break;
                    emit(id);
                    ++n_gen;
                    if (n_gen == a.n_predict) break;
                    const double t1 = now_s();
                    if (!session_eval(s, &id, 1, err)) { rc = fail(err); break; }
                    t_gen += now_s() - t1;
                }
                printf("\n");
                fflush(stdout);

                print_summary(m, s, weights_origin(m, a.use_mmap, load_mib_s));
                fprintf(stderr, "  prompt         : %5zu tokens in %8.3f s = %8.2f tokens/s\n", prompt.size(), t_prompt,
                        t_prompt > 0 ? (double) prompt.size() / t_prompt : 0.0);
                const int n_timed = std::max(0, n_gen - 1);
                fprintf(stderr, "  generation     : %5d tokens in %8.3f s = %8.2f tokens/s\n", n_gen, t_gen,
                        t_gen > 0 ? (double) n_timed / t_gen : 0.0);
            }
        }
    }
    free_backends();
    if (!demo_path.empty()) remove(demo_path.c_str());
    return rc;
}

// No exception leaves main: whatever escapes (std::bad_alloc from a vector, a string) is
// reported in one line like every other error.
int main(int argc, char ** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception & e) {
        return fail(std::string("unexpected error: ") + e.what());
    } catch (...) {
        return fail("unexpected error");
    }
}
