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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace wenc;

static const char * const k_program = "tessera-whisper-encoder";

static int fail(const std::string & msg) { return exw::error_exit(k_program, msg); }

// Multiply-adds x 2 of one encode: the two convolutions, the projections, attention, the MLP.
static double encode_flops(const hparams & hp) {
    const double d = hp.d_model, T = hp.n_ctx(), F = hp.n_frames, ff = hp.ff();
    const double conv = 2.0 * 3.0 * (F * hp.n_mel * d + T * d * d);
    const double per_layer = 2.0 * T * (4.0 * d * d + 2.0 * d * ff) + 2.0 * 2.0 * T * T * d;
    return conv + hp.n_layer * per_layer;
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
    fprintf(stderr, "%s: %d mel x %d frames -> %d layers, d_model %d, %d heads, n_ff %d, on %s\n", k_program, hp.n_mel, hp.n_frames,
            hp.n_layer, hp.d_model, hp.n_head, hp.ff(), tsr_backend_name(backends.front()));
    fprintf(stderr, "%s: weights generated from seed %llu; input %s\n", k_program, (unsigned long long) a.c.seed,
            a.mel_path.empty() ? "a synthetic log-mel spectrogram" : a.mel_path.c_str());
    model m;
    session s;
    std::vector<float> out;
    const double t0 = exw::now_s();
    if (!init_model(m, hp, a.wtype == "f16" ? TSR_TYPE_F16 : TSR_TYPE_F32, a.c.seed, backends.front(), err)) return fail(err);
    const double t_weights = exw::now_s() - t0;
    if (!session_init(s, m, backends, a.flash_attn, err)) return fail(err);
    fprintf(stderr, "  weights        : generated and uploaded in %.3f s\n", t_weights);
    if (!exw::timed_runs("encode", a.c.repeat, encode_flops(hp), [&]() { return encode(s, mel, out, err); })) return fail(err);
    fprintf(stderr, "  attention      : %s\n", a.flash_attn ? "flash_attn_ext" : "mul_mat + soft_max_ext");
    print_output(out, hp);
    if (!a.c.out_path.empty() && !exw::write_floats(a.c.out_path, out, err)) return fail(err);
    exw::print_plan(k_program, s.g, m.weights.bytes(), std::string(tsr_type_name(m.wtype)) + " matrices");
    fprintf(stderr, "  input          : [%d frames, %d mel]   output: [%d, %d frames]\n", hp.n_frames, hp.n_mel, hp.d_model, hp.n_ctx());
    return 0;
}

static int run(int argc, char ** argv) {
    encoder_args a;
    std::string err;
    if (!parse_args(argc, argv, a, err)) return fail(err + " (see --help)");
    if (a.c.show_help) { print_usage(argv[0]); return 0; }
    if (a.c.list_devices) { trun::list_devices(stdout); return 0; }
    const hparams & hp = a.hp;

    std::vector<float> mel;
    if (!a.mel_path.empty() && !read_mel(a.mel_path, hp, mel, err)) return fail(err);
    if (a.mel_path.empty()) mel = synthetic_log_mel(hp.n_mel, hp.n_frames, a.c.seed + 1);

    std::vector<tsr::backend> owned;
    std::vector<tsr_backend_t> backends;
    if (!exw::open_backends(a.c.backend, a.c.device, a.c.threads, owned, backends, err)) return fail(err);
    return encode_and_report(a, mel, backends);
}

int main(int argc, char ** argv) { return exw::guarded_main(k_program, argc, argv, run); }
