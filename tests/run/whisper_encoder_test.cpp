// The Whisper-style encoder example (examples/whisper-encoder): its output against a
// double-precision reference written here in plain loops, its compute buffer at the lower
// bound, and the errors it gives for bad input.
#include <catch2/catch.hpp>

#include "backend_support.h"
#include "test_support.h"

#include "encoder_args.h"
#include "example_checks.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using mat = std::vector<double>;   // row-major [rows][cols]

// A tiny encoder with every feature of the real one: odd frame count (the stride-2 conv's
// last window is half padding), two heads, two blocks, an MLP width that is not 4 x d_model.
wenc::hparams tiny_hparams() {
    wenc::hparams hp;
    hp.n_mel = 6;
    hp.n_frames = 21;
    hp.d_model = 16;
    hp.n_head = 2;
    hp.n_layer = 2;
    hp.n_ff = 40;
    return hp;
}

mat to_double(const std::vector<float> & v) { return mat(v.begin(), v.end()); }

// conv_1d, kernel 3, padding 1: in [IC][L], w ggml [3, IC, OC] (k innermost), b [OC] -> [OC][OL]
mat ref_conv(const mat & in, int IC, int L, const mat & w, const mat & b, int OC, int stride) {
    const int OL = (L + 2 - 3) / stride + 1;
    mat out((size_t) OC * OL);
    for (int oc = 0; oc < OC; ++oc) {
        for (int t = 0; t < OL; ++t) {
            double acc = b[(size_t) oc];
            for (int ic = 0; ic < IC; ++ic) {
                for (int k = 0; k < 3; ++k) {
                    const int src = t * stride + k - 1;
                    if (src >= 0 && src < L) acc += w[(size_t) (k + 3 * (ic + IC * oc))] * in[(size_t) ic * L + src];
                }
            }
            out[(size_t) oc * OL + t] = acc;
        }
    }
    return out;
}

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
void gelu_all(mat & x) { for (double & v : x) v = gelu_erf(v); }

// each of the T rows of x [T][d]: (x - mean) / sqrt(var + eps) * g + b
mat ref_layer_norm(const mat & x, int T, int d, const mat & g, const mat & b, double eps) {
    mat y(x.size());
    for (int t = 0; t < T; ++t) {
        const double * r = &x[(size_t) t * d];
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < d; ++i) mean += r[i];
        mean /= d;
        for (int i = 0; i < d; ++i) var += (r[i] - mean) * (r[i] - mean);
        var /= d;
        for (int i = 0; i < d; ++i) y[(size_t) t * d + i] = (r[i] - mean) / std::sqrt(var + eps) * g[(size_t) i] + b[(size_t) i];
    }
    return y;
}

// y[t][o] = sum_i W[o][i] x[t][i] + b[o]; W ggml [n_in, n_out] is row o = W[o * n_in ...]
mat ref_linear(const mat & x, int T, int n_in, const mat & W, const mat * b, int n_out) {
    mat y((size_t) T * n_out);
    for (int t = 0; t < T; ++t) {
        for (int o = 0; o < n_out; ++o) {
            double acc = b ? (*b)[(size_t) o] : 0.0;
            for (int i = 0; i < n_in; ++i) acc += W[(size_t) o * n_in + i] * x[(size_t) t * n_in + i];
            y[(size_t) t * n_out + o] = acc;
        }
    }
    return y;
}

// softmax(q k^T / sqrt(hd)) v per head, no mask; q, k, v [T][d] with head h in columns [h*hd, (h+1)*hd)
mat ref_attention(const mat & q, const mat & k, const mat & v, int T, int d, int H) {
    const int hd = d / H;
    const double scale = 1.0 / std::sqrt((double) hd);
    mat out((size_t) T * d, 0.0);
    std::vector<double> p((size_t) T);
    for (int h = 0; h < H; ++h) {
        for (int i = 0; i < T; ++i) {
            double top = -1e300, sum = 0.0;
            for (int j = 0; j < T; ++j) {
                double s = 0.0;
                for (int c = 0; c < hd; ++c) s += q[(size_t) i * d + h * hd + c] * k[(size_t) j * d + h * hd + c];
                p[(size_t) j] = s * scale;
                top = std::max(top, p[(size_t) j]);
            }
            for (double & e : p) { e = std::exp(e - top); sum += e; }
            for (int j = 0; j < T; ++j) {
                for (int c = 0; c < hd; ++c) out[(size_t) i * d + h * hd + c] += p[(size_t) j] / sum * v[(size_t) j * d + h * hd + c];
            }
        }
    }
    return out;
}

void add_to(mat & x, const mat & y) { for (size_t i = 0; i < x.size(); ++i) x[i] += y[i]; }

// The encoder on the model's generated weights, in double; [n_ctx][d_model].
mat ref_encoder(const wenc::model & m, const std::vector<float> & mel) {
    const wenc::hparams & hp = m.hp;
    const int d = hp.d_model, T = hp.n_ctx(), ff = hp.ff();
    auto P = [](const wenc::param & p) { return to_double(p.host); };
    mat x = ref_conv(to_double(mel), hp.n_mel, hp.n_frames, P(m.conv1_w), P(m.conv1_b), d, 1);
    gelu_all(x);
    x = ref_conv(x, d, hp.n_frames, P(m.conv2_w), P(m.conv2_b), d, 2);
    gelu_all(x);
    // [d][T] -> [T][d], plus Whisper's sinusoids computed here: sin then cos of t * 10000^(-j/(d/2 - 1))
    mat h((size_t) T * d);
    for (int t = 0; t < T; ++t) {
        for (int j = 0; j < d / 2; ++j) {
            const double a = t * std::pow(10000.0, -(double) j / (d / 2 - 1));
            h[(size_t) t * d + j] = x[(size_t) j * T + t] + std::sin(a);
            h[(size_t) t * d + d / 2 + j] = x[(size_t) (d / 2 + j) * T + t] + std::cos(a);
        }
    }
    for (const wenc::layer_params & L : m.layers) {
        const mat a = ref_layer_norm(h, T, d, P(L.attn_ln_w), P(L.attn_ln_b), hp.eps);
        const mat qb = P(L.q_b), vb = P(L.v_b), ob = P(L.out_b), b1 = P(L.fc1_b), b2 = P(L.fc2_b);
        const mat att = ref_attention(ref_linear(a, T, d, P(L.q_w), &qb, d), ref_linear(a, T, d, P(L.k_w), nullptr, d),
                                      ref_linear(a, T, d, P(L.v_w), &vb, d), T, d, hp.n_head);
        add_to(h, ref_linear(att, T, d, P(L.out_w), &ob, d));
        mat f = ref_linear(ref_layer_norm(h, T, d, P(L.mlp_ln_w), P(L.mlp_ln_b), hp.eps), T, d, P(L.fc1_w), &b1, ff);
        gelu_all(f);
        add_to(h, ref_linear(f, T, ff, P(L.fc2_w), &b2, d));
    }
    return ref_layer_norm(h, T, d, P(m.ln_post_w), P(m.ln_post_b), hp.eps);
}

// Encode the synthetic input on backends (weights on the first) and compare with the reference.
void check_encoder(const std::vector<tsr_backend_t> & backends, tsr_type wtype, bool flash, double max_nmse, wenc::session & s) {
    const wenc::hparams hp = tiny_hparams();
    std::string err;
    wenc::model m;
    REQUIRE_OK(wenc::init_model(m, hp, wtype, 7, backends.front(), err));
    REQUIRE_OK(wenc::session_init(s, m, backends, flash, err));
    const std::vector<float> mel = wenc::synthetic_log_mel(hp.n_mel, hp.n_frames, 8);
    std::vector<float> out;
    REQUIRE_OK(wenc::encode(s, mel, out, err));
    REQUIRE(out.size() == (size_t) hp.d_model * hp.n_ctx());
    const double e = tsrt::nmse(to_double(out), ref_encoder(m, mel));
    INFO(tsr_type_name(wtype) << (flash ? " flash_attn_ext" : " mul_mat + soft_max_ext") << ": nmse " << e);
    CHECK(e < max_nmse);
    // a second encode (the plan reused) gives the same numbers
    std::vector<float> again;
    REQUIRE_OK(wenc::encode(s, mel, again, err));
    CHECK(again == out);
}

} // namespace

TEST_CASE("whisper encoder: CPU output matches a double-precision reference, compute buffer at its lower bound", "[whisper]") {
    tsrt::backend_holder cpu(2);
    // only float rounding is left (measured ~5e-14, f16 weights included: the host keeps their
    // f16-rounded values); GELU's tanh approximation in place of erf in one MLP gives ~2e-8
    for (tsr_type wtype : {TSR_TYPE_F32, TSR_TYPE_F16}) for (bool flash : {true, false}) {
        DYNAMIC_SECTION(tsr_type_name(wtype) << (flash ? " flash" : " soft_max")) {
            wenc::session s;
            check_encoder({cpu.be}, wtype, flash, 1e-10, s);
            exw_test::check_plans_at_lower_bound(s.g);
            CHECK(s.g.n_splits == 1);
        }
    }
}

// A device without convolutions and GELU: the scheduler runs those on the CPU, copying what
// crosses, and the numbers are the same.
TEST_CASE("whisper encoder: ops a backend lacks fall back to the CPU through the scheduler", "[whisper][sched]") {
    tsrt::backend_holder cpu(2);
    tsrt::masked_backend gpu(cpu.be, "NoConv", [](const tsr_tensor * t) {
        return t->op == TSR_OP_CONV_2D || (t->op == TSR_OP_UNARY && tsr_get_unary_op(t) == TSR_UNARY_OP_GELU_ERF);
    });
    wenc::session s;
    check_encoder({gpu, cpu.be}, TSR_TYPE_F32, true, 1e-10, s);
    exw_test::check_cut(s.g, 3);   // conv + GELU on the CPU, the blocks on the device, the last GELU back and forth
    // every node the device declined ran on the CPU: both convolutions, every GELU (2 + one per block)
    const std::map<std::string, int> on_cpu = exw::ops_on(s.g, cpu.be), on_gpu = exw::ops_on(s.g, gpu);
    CHECK(on_cpu.at("CONV_2D") == 2);
    CHECK(on_cpu.at("GELU_ERF") == 2 + tiny_hparams().n_layer);
    CHECK(on_gpu.count("CONV_2D") == 0);
    CHECK(on_gpu.count("GELU_ERF") == 0);
    CHECK(on_gpu.at("FLASH_ATTN_EXT") == tiny_hparams().n_layer);
}

TEST_CASE("whisper encoder: on Vulkan (with the CPU for what it lacks) it matches the reference", "[whisper][vulkan]") {
    tsr::backend vk(exw_test::open_vulkan());
    if (!vk.get()) return;
    tsrt::backend_holder cpu(2);
    wenc::session s;
    // lavapipe: ~5e-14; a GPU may accumulate attention in f16
    check_encoder({vk.get(), cpu.be}, TSR_TYPE_F32, true, 1e-6, s);
}

TEST_CASE("whisper encoder: bad hyper-parameters and input are refused with the values named", "[whisper]") {
    std::string err;
    wenc::hparams hp = tiny_hparams();
    hp.n_head = 3;
    CHECK_FALSE(wenc::check_hparams(hp, err));
    CHECK(err == "n_head = 3 does not divide d_model = 16");
    hp = tiny_hparams();
    hp.n_frames = 0;
    CHECK_FALSE(wenc::check_hparams(hp, err));
    CHECK(err.find("n_frames = 0 is out of range") == 0);
    hp = tiny_hparams();
    hp.d_model = 6;
    hp.n_head = 3;
    CHECK(wenc::check_hparams(hp, err));
    hp.d_model = 2;
    hp.n_head = 1;
    CHECK_FALSE(wenc::check_hparams(hp, err));

    tsrt::backend_holder cpu(1);
    wenc::model m;
    CHECK_FALSE(wenc::init_model(m, tiny_hparams(), TSR_TYPE_Q8_0, 1, cpu.be, err));
    CHECK(err.find("q8_0") != std::string::npos);
    wenc::model ok_model;
    REQUIRE_OK(wenc::init_model(ok_model, tiny_hparams(), TSR_TYPE_F32, 1, cpu.be, err));
    wenc::session s;
    REQUIRE_OK(wenc::session_init(s, ok_model, {cpu.be}, true, err));
    std::vector<float> out;
    CHECK_FALSE(wenc::encode(s, std::vector<float>(5), out, err));
    CHECK(err == "log-mel input has 5 values, expected n_mel x n_frames = 6 x 21 = 126");
}

// The command line: each bad flag named with its value, the Vulkan default device without --device.
TEST_CASE("whisper encoder: command line errors name the flag and value", "[whisper]") {
    auto parse = [](std::vector<std::string> words, wenc::encoder_args & a, std::string & err) {
        words.insert(words.begin(), "tessera-whisper-encoder");
        std::vector<char *> argv;
        for (std::string & w : words) argv.push_back(&w[0]);
        return wenc::parse_args((int) argv.size(), argv.data(), a, err);
    };
    const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
        {{"--n-head", "5"}, "n_head = 5 does not divide d_model = 384"},
        {{"-t", "0"}, "-t 0 is out of range [1, 1024]"},
        {{"--n-frames", "12x"}, "bad whole number '12x' after --n-frames"},
        {{"--seed"}, "missing value after --seed"},
        {{"--bogus"}, "unknown argument '--bogus'"},
        {{"--wtype", "q4_0"}, "--wtype q4_0: expected f32 or f16"},
    };
    for (const auto & b : bad) {
        wenc::encoder_args a;
        std::string err;
        CHECK_FALSE(parse(b.first, a, err));
        CHECK(err == b.second);
    }
    wenc::encoder_args a;
    std::string err;
    REQUIRE_OK(parse({"--n-frames", "21", "--backend", "vulkan", "--seed", "9", "--no-flash-attn"}, a, err));
    CHECK(a.hp.n_frames == 21);
    CHECK(a.c.device == -1);
    CHECK(a.c.seed == 9);
    CHECK_FALSE(a.flash_attn);
}

// --mel: exactly n_mel x n_frames finite floats, else the sizes (or the bad value) named.
TEST_CASE("whisper encoder: a log-mel file of the wrong size or with NaN is refused", "[whisper]") {
    const std::string path = "/tmp/tsr-whisper-mel-" + std::to_string((long) getpid()) + ".f32";
    auto write = [&](const std::vector<float> & v) {
        FILE * f = fopen(path.c_str(), "wb");
        REQUIRE(f);
        REQUIRE(fwrite(v.data(), sizeof(float), v.size(), f) == v.size());
        fclose(f);
    };
    wenc::hparams hp;
    hp.n_mel = 2;
    hp.n_frames = 3;
    std::vector<float> mel;
    std::string err;
    write({1, 2, 3, 4, 5});
    CHECK_FALSE(wenc::read_mel(path, hp, mel, err));
    CHECK(err == path + " has 20 bytes; n_mel x n_frames = 2 x 3 float32 values need 24 (raw float32, each mel bin's frames in a row)");
    write({1, 2, 3, 4, NAN, 6});
    CHECK_FALSE(wenc::read_mel(path, hp, mel, err));
    CHECK(err == path + ": value 4 is not finite");
    write({1, 2, 3, 4, 5, 6});
    REQUIRE_OK(wenc::read_mel(path, hp, mel, err));
    CHECK(mel == std::vector<float>{1, 2, 3, 4, 5, 6});
    remove(path.c_str());
    CHECK_FALSE(wenc::read_mel(path, hp, mel, err));
    CHECK(err == "cannot open " + path);
}
