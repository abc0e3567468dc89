// run_bench: the model runner's speed and memory on random models built in memory through
// the runner's own code (examples/run): GPT-2-small-sized and 1B-LLaMA-sized (TinyLlama
// shapes, GQA 32/4), weights in F32, F16, Q8_0, Q4_0; on request (--models moe) a mixture of
// experts shaped as Mixtral at a quarter of its width (8 experts, 2 used per token). Prompt of 128 tokens in one batch,
// then generation token by token (greedy). One Markdown table; --csv prints CSV rows.
// With a GPU backend, --ngl runs each model at several -ngl values (0, half, all layers on
// the GPU, the rest on the CPU through the scheduler) and reports splits and copies per
// token. On the CPU alone, each row also times the one-token graph through the scheduler
// against gallocr + graph_compute on the backend directly: the scheduler's cost per graph.
// "generation reads": the weights a generated token reads (its mat-vecs' matrices) times
// tokens per second, to hold against cpu_bench --read-only: decoding is bound by that read.
//
//   run_bench [--csv] [-t threads (2)] [--prompt N (128)] [--gen N (16)] [--rounds N (3): best of N]
//             [--models gpt2,llama1b,moe] [--types f32,f16,q8_0,q4_0,q4_K_M,q5_K_M,q6_K,iq4_nl,q3_K,q2_K] [--backend cpu|vulkan|cuda]
//             [--ngl 0,half,all] [--parallel] [--write-gguf DIR] [--no-repack] [--no-flash-attn]
// --parallel: the scheduler keeps rotating input copies with events (sched.h `parallel`).
// --write-gguf DIR writes each selected model to DIR/tsr-<model>-<weights>.gguf instead of
// timing it (the same weights, seed 42; vocabularies padded to the real models' sizes), for
// llama.cpp's side of the comparison: tests/bench/run_llamacpp.mjs times those files.
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera/gguf.h"
#include "tessera-cpu.h"

#include "backends.h"
#include "graph.h"
#include "random_model.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

using namespace trun;

static double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static double mib(size_t b) { return (double) b / (1024.0 * 1024.0); }

static hparams gpt2_small() {
    hparams hp;
    hp.a = arch::gpt2;
    hp.n_vocab = 50257;
    hp.n_ctx = 1024;
    hp.n_embd = 768;
    hp.n_layer = 12;
    hp.n_head = 12;
    hp.n_head_kv = 12;
    hp.n_ff = 3072;
    return hp;
}

// Mixtral-8x7B's shape at a quarter of its width and 4 of its 32 layers: 8 experts of
// 1024 -> 3584 -> 1024, 2 used per token, GQA 8/2, its 32000-token vocabulary (428M parameters;
// a token reads 99M of its layers' (2 of 8 experts) and the 33M of the output matrix).
static hparams mixtral_quarter() {
    hparams hp = tinyllama_1b_hparams();  // a llama with the 32000-token vocabulary
    hp.n_embd = 1024, hp.n_ff = 3584, hp.n_layer = 4;
    hp.n_head = 8, hp.n_head_kv = 2, hp.n_rot = 128;  // heads of 128, as Mixtral's
    hp.n_expert = 8, hp.n_expert_used = 2;
    return hp;
}

// fill the weights with several threads (tensors round-robin)
static bool fill_parallel(tsr_context * ctx, uint64_t seed, int n_threads, std::string & err) {
    std::vector<tsr_tensor *> ts;
    for (tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) ts.push_back(t);
    std::vector<std::string> errs((size_t) n_threads);
    std::vector<std::thread> th;
    for (int i = 0; i < n_threads; ++i) {
        th.emplace_back([&, i] {
            for (size_t k = (size_t) i; k < ts.size(); k += (size_t) n_threads) {
                if (!fill_random(ts[k], seed, errs[(size_t) i])) return;
            }
        });
    }
    for (auto & t : th) t.join();
    for (auto & e : errs) {
        if (!e.empty()) { err = e; return false; }
    }
    return true;
}

struct row {
    std::string model, type, ngl = "-";
    double params_m = 0, weights = 0, kv = 0, compute = 0, lower = 0, workspace = 0, build_s = 0, pp = 0, tg = 0;
    int splits = 0, copies = 0;
    double direct_alloc_us = 0, sched_alloc_us = 0, direct_us = 0, sched_us = 0;  // per one-token graph (CPU alone)
    double gen_read_mb = 0;  // weights a generated token reads (MB), gen_read_mb * tg / 1000 = GB/s
    std::string error;
};

// The bytes of weights a one-token graph reads: the weight matrices its mat-vecs take
// (token_embd only where it is the output too; get_rows reads one row of it), each once;
// mul_mat_id counts its n_expert_used of n_expert. Generation is bound by reading these:
// times tokens per second, the rate to hold against the machine's read bandwidth.
static bool gen_weight_bytes(session & s, double & mb, std::string & err) {
    graph_io io;
    if (!build_graph(s, 1, std::min(s.n_past, s.n_ctx - 1), false, io, err)) return false;
    std::unordered_set<const tsr_tensor *> weights, seen;
    for (tsr_tensor * t = tsr_get_first_tensor(s.m->ctx_w); t; t = tsr_get_next_tensor(s.m->ctx_w, t)) weights.insert(t);
    double bytes = 0;
    for (int i = 0; i < tsr_graph_n_nodes(io.gf); ++i) {
        const tsr_tensor * t = tsr_graph_node(io.gf, i);
        if (t->op != TSR_OP_MUL_MAT && t->op != TSR_OP_MUL_MAT_ID) continue;
        const tsr_tensor * w = t->src[0];
        if (!weights.count(w) || !seen.insert(w).second) continue;
        const double share = t->op == TSR_OP_MUL_MAT_ID ? (double) s.m->hp.n_expert_used / s.m->hp.n_expert : 1.0;
        bytes += (double) tsr_nbytes(w) * share;
    }
    mb = bytes / 1e6;
    return true;
}

// One-token graphs at the session's position, n_iter times, placed and computed either
// through the scheduler or directly (a gallocr of the backend's buffer type, then the
// backend's graph_compute): microseconds per graph for the placement and for the whole.
static bool time_one_token_graphs(session & s, tsr_backend_t be, bool through_sched, int n_iter, double & alloc_us,
                                  double & total_us, std::string & err) {
    tsr_gallocr_t ga = through_sched ? nullptr : tsr_gallocr_new(tsr_backend_get_default_buffer_type(be));
    double t_alloc = 0, t_total = 0;
    bool ok = through_sched || ga;
    std::vector<float> mask;
    // at the last position the context holds when generation filled it (n_past == n_ctx)
    const int n_past = std::min(s.n_past, s.n_ctx - 1);
    for (int i = 0; ok && i <= n_iter; ++i) {   // i == 0: warm-up
        graph_io io;
        ok = build_graph(s, 1, n_past, false, io, err);
        const double t0 = now_s();
        ok = ok && (through_sched ? tsr_backend_sched_alloc_graph(s.sched, io.gf) : tsr_gallocr_alloc_graph(ga, io.gf));
        const double t1 = now_s();
        const int32_t tok = 0, pos = n_past;
        mask.assign((size_t) io.n_kv, 0.0f);
        ok = ok && tsr_backend_tensor_set(io.tokens, &tok, 0, sizeof tok) && tsr_backend_tensor_set(io.pos, &pos, 0, sizeof pos) &&
             tsr_backend_tensor_set(io.mask, mask.data(), 0, mask.size() * sizeof(float));
        const double t2 = now_s();
        ok = ok && (through_sched ? tsr_backend_sched_graph_compute(s.sched, io.gf) : tsr_backend_graph_compute(be, io.gf)) == TSR_STATUS_SUCCESS;
        const double t3 = now_s();
        if (i > 0) { t_alloc += t1 - t0; t_total += (t1 - t0) + (t3 - t2); }
    }
    if (!ok && err.empty()) err = tsr_last_error();
    tsr_gallocr_free(ga);
    alloc_us = 1e6 * t_alloc / n_iter;
    total_us = 1e6 * t_total / n_iter;
    return ok;
}

// The selected model written as a GGUF file into dir (the built-in vocabularies padded to
// the model's n_vocab).
static bool write_model_file(const std::string & dir, const char * mname, const hparams & hp, const char * tname,
                             const weight_types & wt, std::string & err) {
    tokenizer tok;
    std::vector<std::string> merges;
    if (hp.a == arch::gpt2) build_builtin_gpt2_vocab(300, tok, merges);
    else build_builtin_spm_vocab(200, tok);
    pad_vocab(tok, hp.n_vocab);
    const std::string path = dir + "/tsr-" + mname + "-" + tname + ".gguf";
    fprintf(stderr, "run_bench: writing %s ...\n", path.c_str());
    return write_random_model(path.c_str(), hp, tok, merges, wt, hp.a == arch::gpt2, 42, err);
}

int main(int argc, char ** argv) {
    bool csv = false, parallel = false, repack = true, flash_attn = true;
    std::string gguf_dir;
    int threads = 2, n_prompt = 128, n_gen = 16, n_rounds = 3;
    std::string models = "gpt2,llama1b", types = "f32,f16,q8_0,q4_0", backend_name = "cpu", ngls = "all";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : ""; };
        if (a == "--csv") csv = true;
        else if (a == "-t") threads = atoi(next());
        else if (a == "--prompt") n_prompt = atoi(next());
        else if (a == "--rounds") n_rounds = std::max(1, atoi(next()));
        else if (a == "--gen") n_gen = atoi(next());
        else if (a == "--models") models = next();
        else if (a == "--types") types = next();
        else if (a == "--backend") backend_name = next();
        else if (a == "--ngl") ngls = next();
        else if (a == "--parallel") parallel = true;
        else if (a == "--write-gguf") gguf_dir = next();
        else if (a == "--repack") repack = true;  // 4- and 5-bit / Q3_K / Q2_K CPU weights interleaved in a CPU_REPACK buffer (the default, as tessera-run)
        else if (a == "--no-repack") repack = false;
        else if (a == "--no-flash-attn") flash_attn = false;  // mul_mat + soft_max_ext attention, as tessera-run's option
        else { fprintf(stderr, "usage: %s [--csv] [-t N] [--prompt N] [--gen N] [--rounds N] [--models gpt2,llama1b,moe] [--types f32,f16,q8_0,q4_0,q4_K_M,q5_K_M,q6_K,iq4_nl,q3_K,q2_K] [--backend cpu|vulkan|cuda] [--ngl 0,half,all] [--parallel] [--write-gguf DIR] [--no-repack] [--no-flash-attn]\n", argv[0]); return 2; }
    }
    std::string err;
    tsr_backend_t backend = make_backend(backend_name, -1, threads, err);   // the kind's first device
    if (!backend) { fprintf(stderr, "run_bench: %s\n", err.c_str()); return 1; }
    const bool gpu = !tsr_backend_is_cpu(backend);
    tsr_backend_t cpu = gpu ? make_backend("cpu", 0, threads, err) : nullptr;
    if (gpu && !cpu) { fprintf(stderr, "run_bench: %s\n", err.c_str()); return 1; }
    std::vector<std::string> ngl_list;
    for (size_t p = 0; gpu && p <= ngls.size();) {
        const size_t q = std::min(ngls.find(',', p), ngls.size());
        ngl_list.push_back(ngls.substr(p, q - p));
        p = q + 1;
    }
    if (!gpu || !gguf_dir.empty()) ngl_list = {"-"};

    struct mt { const char * name; weight_types t; };
    // q4_K_M / q5_K_M: llama.cpp's mixes (Q6_K for output.weight and some attn_v / ffn_down)
    const mt all_types[] = {{"f32", TSR_TYPE_F32},   {"f16", TSR_TYPE_F16},    {"q8_0", TSR_TYPE_Q8_0},
                            {"q4_0", TSR_TYPE_Q4_0}, {"q4_K_M", q4_k_m_types()}, {"q5_K_M", q5_k_m_types()},
                            {"q6_K", TSR_TYPE_Q6_K},
                            {"iq4_nl", TSR_TYPE_IQ4_NL},    {"q3_K", TSR_TYPE_Q3_K}, {"q2_K", TSR_TYPE_Q2_K}};
    std::vector<row> rows;
    for (const char * mname : {"gpt2", "llama1b", "moe"}) {
        if (("," + models + ",").find(std::string(",") + mname + ",") == std::string::npos) continue;
        const std::string mn = mname;
        const hparams hp = mn == "gpt2" ? gpt2_small() : mn == "moe" ? mixtral_quarter() : tinyllama_1b_hparams();
        for (const mt & ty : all_types) for (const std::string & ngl : ngl_list) {
            if (("," + types + ",").find(std::string(",") + ty.name + ",") == std::string::npos) continue;
            if (!gguf_dir.empty()) {
                if (!write_model_file(gguf_dir, mname, hp, ty.name, ty.t, err)) { fprintf(stderr, "run_bench: %s\n", err.c_str()); return 1; }
                continue;
            }
            row r;
            r.ngl = ngl;
            r.model = mn == "gpt2" ? "GPT-2 small (124M)" : mn == "moe" ? "Mixtral-shaped MoE at 1/4 width (8 experts; 2 used)" : "LLaMA 1.1B (GQA 32/4)";
            r.type = ty.name;
            fprintf(stderr, "run_bench: %s %s: building weights...\n", mname, ty.name);
            model m;
            const double t0 = now_s();
            const bool tied = hp.a == arch::gpt2;
            // headers and buffer through the runner's code, then a parallel fill
            m.hp = hp;
            m.ctx_w = new_weight_headers(hp, ty.t, tied, m.w, err);
            bool ok = m.ctx_w != nullptr;
            placement pl;
            pl.main = backend;
            pl.cpu = cpu;
            pl.n_gpu_layers = ngl == "all" || ngl == "-" ? -1 : ngl == "half" ? hp.n_layer / 2 : atoi(ngl.c_str());
            pl.repack = repack;
            ok = ok && place_weights(m, pl, err);
            ok = ok && fill_parallel(m.ctx_w, 42, std::max(1, (int) std::thread::hardware_concurrency()), err);
            ok = ok && (!repack || weights_written_in_place(m.ctx_w, err));
            r.build_s = now_s() - t0;
            session s;
            session_params sp;
            sp.n_ctx = kv_pad(n_prompt + n_gen);
            sp.n_batch = n_prompt;
            sp.kv_type = TSR_TYPE_F16;
            sp.flash_attn = flash_attn;
            sp.parallel = parallel;
            ok = ok && session_init(s, m, backend, sp, err);
            if (ok) {
                int64_t n_params = 0;
                for (tsr_tensor * t = tsr_get_first_tensor(m.ctx_w); t; t = tsr_get_next_tensor(m.ctx_w, t)) n_params += tsr_nelements(t);
                r.params_m = (double) n_params / 1e6;
                std::vector<int32_t> toks((size_t) n_prompt);
                rng g(7);
                for (auto & t : toks) t = (int32_t) (g.next() % (uint64_t) hp.n_vocab);
                // best of n_rounds (a fresh sequence each: n_past back to 0), as run_llamacpp.mjs
                for (int round = 0; ok && round < n_rounds; ++round) {
                    s.n_past = 0;
                    const double t1 = now_s();
                    ok = session_eval(s, toks.data(), n_prompt, err);
                    const double t_pp = now_s() - t1;
                    double t_tg = 0;
                    for (int i = 0; ok && i < n_gen; ++i) {
                        const int32_t id = (int32_t) (std::max_element(s.logits.begin(), s.logits.end()) - s.logits.begin());
                        const double t2 = now_s();
                        ok = session_eval(s, &id, 1, err);
                        t_tg += now_s() - t2;
                    }
                    if (ok) {
                        r.pp = std::max(r.pp, n_prompt / t_pp);
                        r.tg = std::max(r.tg, n_gen / t_tg);
                    }
                }
                r.weights = mib(tsr_backend_buffer_get_size(m.buf_w) + tsr_backend_buffer_get_size(m.buf_w_cpu));
                r.kv = mib(tsr_backend_buffer_get_size(s.buf_kv) + tsr_backend_buffer_get_size(s.buf_kv_cpu));
                r.compute = mib(s.compute_size);
                r.lower = mib(s.compute_lower_bound);
                for (tsr_backend_t b : m.backends) r.workspace += mib(tsr_backend_get_workspace_size(b));
                r.splits = s.n_splits;
                r.copies = s.n_split_inputs;
                ok = ok && gen_weight_bytes(s, r.gen_read_mb, err);
                if (ok && !gpu) {
                    ok = time_one_token_graphs(s, backend, false, 20, r.direct_alloc_us, r.direct_us, err) &&
                         time_one_token_graphs(s, backend, true, 20, r.sched_alloc_us, r.sched_us, err);
                }
            }
            if (!ok) r.error = err;
            rows.push_back(r);
            fprintf(stderr, "run_bench: %s %s: %s\n", mname, ty.name, ok ? "done" : err.c_str());
        }
    }
    if (!gguf_dir.empty()) {
        tsr_backend_free(cpu);
        tsr_backend_free(backend);
        return 0;
    }
    char dev[128];
    snprintf(dev, sizeof dev, "%s, %d threads", tsr_backend_name(backend), threads);
    if (csv) {
        // unquoted: no field but the last (error) may hold a comma, the model names included
        // (side_by_side.sh reads the columns by splitting at commas)
        printf("model,weights,ngl,params_M,weights_MiB,kv_cache_MiB,compute_MiB,compute_lower_bound_MiB,workspace_MiB,build_s,prompt_tok_s,gen_tok_s,"
               "splits_per_token,copies_per_token,direct_alloc_us,sched_alloc_us,direct_graph_us,sched_graph_us,gen_weights_MB_per_token,error\n");
        for (const row & r : rows) {
            printf("%s,%s,%s,%.1f,%.1f,%.1f,%.2f,%.2f,%.2f,%.1f,%.2f,%.2f,%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%s\n", r.model.c_str(), r.type.c_str(),
                   r.ngl.c_str(), r.params_m, r.weights, r.kv, r.compute, r.lower, r.workspace, r.build_s, r.pp, r.tg, r.splits, r.copies,
                   r.direct_alloc_us, r.sched_alloc_us, r.direct_us, r.sched_us, r.gen_read_mb, r.error.c_str());
        }
    } else {
        printf("run_bench (%s; prompt %d tokens in one batch, %d generated, best of %d; KV cache F16, %d positions; %s; scheduler parallel %s)\n\n",
               dev, n_prompt, n_gen, n_rounds, kv_pad(n_prompt + n_gen), flash_attn ? "flash_attn_ext" : "mul_mat + soft_max_ext", parallel ? "on" : "off");
        printf("| model | weights | -ngl | params (M) | weights (MiB) | KV cache (MiB) | compute (MiB) | compute lower bound (MiB) | workspace (MiB) | prompt (tok/s) | generation (tok/s) | generation reads (GB/s of weights) | splits / copies per token |\n");
        printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (const row & r : rows) {
            if (!r.error.empty()) { printf("| %s | %s | %s | error: %s ||||||||||\n", r.model.c_str(), r.type.c_str(), r.ngl.c_str(), r.error.c_str()); continue; }
            printf("| %s | %s | %s | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f (%.0f MB a token) | %d / %d |\n", r.model.c_str(),
                   r.type.c_str(), r.ngl.c_str(), r.params_m, r.weights, r.kv, r.compute, r.lower, r.workspace, r.pp, r.tg,
                   r.gen_read_mb * r.tg / 1e3, r.gen_read_mb, r.splits, r.copies);
        }
        if (!gpu) {
            printf("\nScheduler overhead per one-token graph (CPU backend alone; 20 graphs, after one warm-up)\n\n");
            printf("| model | weights | place: gallocr (us) | place: scheduler (us) | place + compute: direct (us) | place + compute: scheduler (us) | overhead (us) |\n");
            printf("|---|---|---:|---:|---:|---:|---:|\n");
            for (const row & r : rows) {
                if (!r.error.empty()) continue;
                printf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", r.model.c_str(), r.type.c_str(), r.direct_alloc_us, r.sched_alloc_us,
                       r.direct_us, r.sched_us, r.sched_us - r.direct_us);
            }
        }
    }
    tsr_backend_free(cpu);
    tsr_backend_free(backend);
    return 0;
}
