// tessera-whisper-encoder: a Whisper-style audio encoder (Whisper tiny's shapes by default)
// with weights generated from a seed, on any backend; prints where the memory went and how
// long an encode takes.
//
//   tessera-whisper-encoder [--n-frames 3000 --d-model 384 --n-head 6 --n-layer 4 ...]
//                           [--mel input.f32] [--out output.f32] [--backend cpu|vulkan|cuda] [-t threads]
//
// Weights live in a WEIGHTS buffer of the chosen backend; activations in compute buffers the
// scheduler plans with gallocr (on a GPU, an op it lacks runs on the CPU).
#include "encoder_args.h"
#include "../run/backends.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

using namespace wenc;

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double mib(size_t b) { return (double) b / (1024.0 * 1024.0); }

static int fail(const std::string & msg) {
    fprintf(stderr, "tessera-whisper-encoder: error: %s\n", msg.c_str());
    return 1;
}

// The whole file as n_mel x n_frames floats, or false + a message naming the sizes.
static bool read_mel(const std::string & path, const hparams & hp, std::vector<float> & mel, std::string & err) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) { err = "cannot open " + path; return false; }
    const size_t want = (size_t) hp.n_mel * (size_t) hp.n_frames;
    const long bytes = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1L;
    bool ok = bytes >= 0 && (size_t) bytes == want * sizeof(float);
    if (ok) {
        mel.resize(want);
        rewind(f);
        ok = fread(mel.data(), sizeof(float), want, f) == want;
        if (!ok) err = "cannot read " + path;
    } else {
        err = path + " has " + std::to_string(bytes) + " bytes; n_mel x n_frames = " + std::to_string(hp.n_mel) + " x " +
              std::to_string(hp.n_frames) + " float32 values need " + std::to_string(want * sizeof(float)) +
              " (raw float32, each mel bin's frames in a row)";
    }
    fclose(f);
    for (size_t i = 0; ok && i < want; ++i) {
        if (!std::isfinite(mel[i])) { err = path + ": value " + std::to_string(i) + " is not finite"; ok = false; }
    }
    return ok;
}

static bool write_output(const std::string & path, const std::vector<float> & out, std::string & err) {
    FILE * f = fopen(path.c_str(), "wb");
    bool ok = f && fwrite(out.data(), sizeof(float), out.size(), f) == out.size();
    if (f && fclose(f) != 0) ok = false;
    if (!ok) err = "cannot write " + path;
    return ok;
}

// Multiply-adds x 2 of one encode: the two convolutions, the projections, attention, the MLP.
static double encode_flops(const hparams & hp) {
    const double d = hp.d_model, T = hp.n_ctx(), F = hp.n_frames, ff = hp.ff();
    const double conv = 2.0 * 3.0 * (F * hp.n_mel * d + T * d * d);
    const double per_layer = 2.0 * T * (4.0 * d * d + 2.0 * d * ff) + 2.0 * 2.0 * T * T * d;
    return conv + hp.n_layer * per_layer;
}

static void print_plan(const model & m, const session & s) {
    const hparams & hp = m.hp;
    fprintf(stderr, "\ntessera-whisper-encoder: memory plan\n");
    fprintf(stderr, "  weights buffer : %10.2f MiB  (%s, %s matrices)\n", mib(m.weights.bytes()),
            tsr_backend_name(s.backends.front()), tsr_type_name(m.wtype));
    for (size_t i = 0; i < s.backends.size(); ++i) {
        const tsr_backend_sched_buffer_info & c = s.compute[i];
        fprintf(stderr, "  %s\n", tsr_backend_name(s.backends[i]));
        fprintf(stderr, "    compute buffer : %10.2f MiB  (planned %.2f MiB, lower bound %.2f MiB, ratio %.3f; input copies %.2f MiB)\n",
                mib(c.buffer_size), mib(c.planned_size), mib(c.lower_bound),
                c.lower_bound ? (double) c.planned_size / (double) c.lower_bound : 0.0, mib(c.input_bytes));
        fprintf(stderr, "    workspace      : %10.2f MiB\n", mib(tsr_backend_get_workspace_size(s.backends[i])));
    }
    fprintf(stderr, "  graph          : %d nodes, %d splits, %d input copies\n", s.n_nodes, s.n_splits, s.n_split_inputs);
    fprintf(stderr, "  input          : [%d frames, %d mel]   output: [%d, %d frames]\n", hp.n_frames, hp.n_mel, hp.d_model, hp.n_ctx());
}

// A few numbers to recognise the output by (mean, spread, the first values).
static void print_output(const std::vector<float> & out, const hparams & hp) {
    double sum = 0.0, sum2 = 0.0;
    for (float v : out) { sum += v; sum2 += (double) v * v; }
    const double mean = sum / (double) out.size();
    printf("encoder output [%d, %d]: mean %.6f, std %.6f, frame 0: %.5f %.5f %.5f %.5f ...\n", hp.d_model, hp.n_ctx(), mean,
           std::sqrt(std::max(0.0, sum2 / (double) out.size() - mean * mean)), out[0], out[1], out[2], out[3]);
}

// Generate the model on backends[0], plan, encode once and then `repeat` timed times, print.
static int encode_and_report(const encoder_args & a, const std::vector<float> & mel, const std::vector<tsr_backend_t> & backends) {
    const hparams & hp = a.hp;
    std::string err;
    fprintf(stderr, "tessera-whisper-encoder: %d mel x %d frames -> %d layers, d_model %d, %d heads, n_ff %d, on %s\n", hp.n_mel,
            hp.n_frames, hp.n_layer, hp.d_model, hp.n_head, hp.ff(), tsr_backend_name(backends.front()));
    fprintf(stderr, "tessera-whisper-encoder: weights generated from seed %llu; input %s\n", (unsigned long long) a.seed,
            a.mel_path.empty() ? "a synthetic log-mel spectrogram" : a.mel_path.c_str());
    model m;
    session s;
    std::vector<float> out;
    const tsr_type wtype = a.wtype == "f16" ? TSR_TYPE_F16 : TSR_TYPE_F32;
    const double t0 = now_s();
    if (!init_model(m, hp, wtype, a.seed, backends.front(), err)) return fail(err);
    const double t_weights = now_s() - t0;
    if (!session_init(s, m, backends, a.flash_attn, err)) return fail(err);
    const double t1 = now_s();
    if (!encode(s, mel, out, err)) return fail(err);
    const double t_first = now_s() - t1;
    double t_best = 1e300, t_sum = 0.0;
    for (int r = 0; r < a.repeat; ++r) {
        const double t = now_s();
        if (!encode(s, mel, out, err)) return fail(err);
        const double dt = now_s() - t;
        t_best = std::min(t_best, dt);
        t_sum += dt;
    }
    print_output(out, hp);
    if (!a.out_path.empty() && !write_output(a.out_path, out, err)) return fail(err);
    print_plan(m, s);
    const double gflop = encode_flops(hp) * 1e-9;
    fprintf(stderr, "  weights        : generated and uploaded in %.3f s\n", t_weights);
    const double t_timed = a.repeat > 0 ? t_best : t_first;
    fprintf(stderr, "  encode         : first %.3f s", t_first);
    if (a.repeat > 0) fprintf(stderr, "; %d more: best %.3f s, mean %.3f s", a.repeat, t_best, t_sum / a.repeat);
    fprintf(stderr, " (%.2f GFLOP, %.1f GFLOP/s)\n", gflop, t_timed > 0 ? gflop / t_timed : 0.0);
    fprintf(stderr, "  attention      : %s\n", a.flash_attn ? "flash_attn_ext" : "mul_mat + soft_max_ext");
    return 0;
}

static int run(int argc, char ** argv) {
    encoder_args a;
    std::string err;
    if (!parse_args(argc, argv, a, err)) return fail(err + " (see --help)");
    if (a.show_help) { print_usage(argv[0]); return 0; }
    if (a.list_devices) { trun::list_devices(stdout); return 0; }
    if (a.backend == "vulkan" && !a.device_given) a.device = -1;   // the default Vulkan device
    const hparams & hp = a.hp;

    std::vector<float> mel;
    if (!a.mel_path.empty() && !read_mel(a.mel_path, hp, mel, err)) return fail(err);
    if (a.mel_path.empty()) mel = synthetic_log_mel(hp.n_mel, hp.n_frames, a.seed + 1);

    // the chosen backend, and next to a GPU the CPU for the ops the GPU lacks
    std::vector<tsr::backend> owned;
    owned.emplace_back(trun::make_backend(a.backend, a.device, a.threads, err));
    if (!owned.back().get()) return fail(err);
    if (!tsr_backend_is_cpu(owned.back())) {
        owned.emplace_back(trun::make_backend("cpu", 0, a.threads, err));
        if (!owned.back().get()) return fail(err);
    }
    std::vector<tsr_backend_t> backends;
    for (const tsr::backend & b : owned) backends.push_back(b.get());
    return encode_and_report(a, mel, backends);
}

// No exception leaves main: whatever escapes (std::bad_alloc from a vector) is reported in
// one line like every other error.
int main(int argc, char ** argv) {
    std::string what = "unknown exception";
    try {
        return run(argc, argv);
    } catch (const std::exception & e) {
        what = e.what();
    } catch (...) {
    }
    return fail("unexpected error: " + what);
}
