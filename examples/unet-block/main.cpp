// tessera-unet-block: one step of a small diffusion U-Net (Stable Diffusion's blocks: ResNet
// blocks with GroupNorm and a timestep embedding, a down- and an up-sampling level joined by a
// skip, self-attention at the low level) with weights generated from a seed, on any backend;
// prints where the memory went and how long a step takes.
//
//   tessera-unet-block [--width 64 --height 64 --in-ch 4 --ch 64 --groups 32 --heads 4]
//                      [--timestep 500] [--out noise.f32] [--backend cpu|vulkan|cuda] [-t threads]
//
// Weights live in a WEIGHTS buffer of the chosen backend; activations in compute buffers the
// scheduler plans with gallocr (on a GPU, an op it lacks runs on the CPU).
#include "unet.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace unet;

static const char * const k_program = "tessera-unet-block";

static int fail(const std::string & msg) { return exw::error_exit(k_program, msg); }

struct unet_args {
    hparams hp;
    float timestep = 500.0f;
    exw::common_args c;
};

static void print_usage(const char * argv0) {
    printf("usage: %s [options]\n"
           "One step of a small diffusion U-Net on a random latent, with weights generated from a seed.\n"
           "  --width N, --height N  latent size, even (default 64 x 64)\n"
           "  --in-ch N              latent channels (default 4)\n"
           "  --ch N                 base channels; the low level has 2 x ch (default 64)\n"
           "  --groups N             GroupNorm groups, dividing ch (default 32)\n"
           "  --heads N              attention heads, dividing 2 x ch (default 4)\n"
           "  --timestep T           diffusion timestep, 0..100000 (default 500)\n"
           "  --out PATH             write the predicted noise: raw float32, in-ch planes of height rows of width\n"
           "%s",
           argv0, exw::common_usage());
}

static bool parse_args(int argc, char ** argv, unet_args & a, std::string & err) {
    exw::arg_reader r(argc, argv, err);
    while (r.next()) {
        bool ok = true;
        int t = 0;
        if (exw::read_common_flag(r, a.c, ok)) {}
        else if (r.is("--width")) ok = r.int_value(a.hp.width, 2, k_max_side);
        else if (r.is("--height")) ok = r.int_value(a.hp.height, 2, k_max_side);
        else if (r.is("--in-ch")) ok = r.int_value(a.hp.in_ch, 1, k_max_ch);
        else if (r.is("--ch")) ok = r.int_value(a.hp.ch, 2, k_max_ch);
        else if (r.is("--groups")) ok = r.int_value(a.hp.n_groups, 1, k_max_ch);
        else if (r.is("--heads")) ok = r.int_value(a.hp.n_head, 1, 2 * k_max_ch);
        else if (r.is("--timestep")) { ok = r.int_value(t, 0, 100000); a.timestep = (float) t; }
        else ok = r.unknown();
        if (!ok) return false;
    }
    return exw::finish_common(a.c, err) && check_hparams(a.hp, err);
}

// A latent of Gaussian-like noise (the start of sampling): the sum of 4 uniforms, scaled to unit variance.
static std::vector<float> noise_latent(const hparams & hp, uint64_t seed) {
    exw::rng r(seed);
    std::vector<float> x((size_t) hp.width * hp.height * hp.in_ch);
    for (float & v : x) v = (r.uniform(-1, 1) + r.uniform(-1, 1) + r.uniform(-1, 1) + r.uniform(-1, 1)) * 0.8660254f;
    return x;
}

// A few numbers to recognise the output by (mean, spread, the first values).
static void print_output(const std::vector<float> & out, const hparams & hp) {
    double sum = 0.0, sum2 = 0.0;
    for (float v : out) { sum += v; sum2 += (double) v * v; }
    const double mean = sum / (double) out.size();
    printf("predicted noise [%d, %d, %d]: mean %.6f, std %.6f, first: %.5f %.5f %.5f %.5f ...\n", hp.width, hp.height, hp.in_ch, mean,
           std::sqrt(std::max(0.0, sum2 / (double) out.size() - mean * mean)), out[0], out[1], out[2], out[3]);
}

static int step_and_report(const unet_args & a, const std::vector<tsr_backend_t> & backends) {
    const hparams & hp = a.hp;
    std::string err;
    fprintf(stderr, "%s: latent %d x %d x %d, ch %d (low level %d), %d groups, %d heads, timestep %g, on %s\n", k_program, hp.width,
            hp.height, hp.in_ch, hp.ch, 2 * hp.ch, hp.n_groups, hp.n_head, (double) a.timestep, tsr_backend_name(backends.front()));
    fprintf(stderr, "%s: weights generated from seed %llu; input random noise\n", k_program, (unsigned long long) a.c.seed);
    model m;
    session s;
    std::vector<float> out;
    const std::vector<float> x = noise_latent(hp, a.c.seed + 1);
    const double t0 = exw::now_s();
    if (!init_model(m, hp, a.c.seed, backends.front(), err)) return fail(err);
    fprintf(stderr, "  weights        : generated and uploaded in %.3f s\n", exw::now_s() - t0);
    if (!session_init(s, m, backends, err)) return fail(err);
    if (!exw::timed_runs("step", a.c.repeat, flops(hp), [&]() { return predict(s, x, a.timestep, out, err); })) return fail(err);
    print_output(out, hp);
    if (!a.c.out_path.empty() && !exw::write_floats(a.c.out_path, out, err)) return fail(err);
    exw::print_plan(k_program, s.g, m.weights.bytes(), "f32");
    return 0;
}

static int run(int argc, char ** argv) {
    unet_args a;
    std::string err;
    if (!parse_args(argc, argv, a, err)) return fail(err + " (see --help)");
    if (a.c.show_help) { print_usage(argv[0]); return 0; }
    if (a.c.list_devices) { trun::list_devices(stdout); return 0; }
    std::vector<tsr::backend> owned;
    std::vector<tsr_backend_t> backends;
    if (!exw::open_backends(a.c.backend, a.c.device, a.c.threads, owned, backends, err)) return fail(err);
    return step_and_report(a, backends);
}

int main(int argc, char ** argv) { return exw::guarded_main(k_program, argc, argv, run); }
