// The diffusion U-Net example (examples/unet-block): its output against a double-precision
// reference written here in plain loops, its compute buffers at the lower bound, and the
// errors it gives for bad input.
#include <catch2/catch.hpp>

#include "backend_support.h"
#include "test_support.h"

#include "unet.h"
#include "example_checks.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace {

// A tiny network with every feature of the real one: a non-square latent (a width/height mix-up
// shows), 2 channels per group, two heads.
unet::hparams tiny_hparams() {
    unet::hparams hp;
    hp.width = 6;
    hp.height = 4;
    hp.in_ch = 3;
    hp.ch = 8;
    hp.n_groups = 4;
    hp.n_head = 2;
    return hp;
}

using vec = std::vector<double>;

// An image as C planes of H rows of W values (ggml's [W, H, C] order).
struct image {
    int w = 0, h = 0, c = 0;
    vec v;
    image(int w_, int h_, int c_) : w(w_), h(h_), c(c_), v((size_t) w_ * h_ * c_, 0.0) {}
    double & at(int x, int y, int ch) { return v[((size_t) ch * h + y) * w + x]; }
    double at(int x, int y, int ch) const { return v[((size_t) ch * h + y) * w + x]; }
};

vec P(const exw::param & p) { return vec(p.host.begin(), p.host.end()); }

// Convolution with padding k/2, stride s: kernel [k, k, cin, cout] (kx innermost), bias [cout].
image ref_conv(const image & in, const unet::conv_params & cp, int stride) {
    const int k = (int) cp.w.t->ne[0], cout = (int) cp.w.t->ne[3], pad = k / 2;
    const vec w = P(cp.w), b = P(cp.b);
    image out((in.w + 2 * pad - k) / stride + 1, (in.h + 2 * pad - k) / stride + 1, cout);
    for (int co = 0; co < cout; ++co) for (int oy = 0; oy < out.h; ++oy) for (int ox = 0; ox < out.w; ++ox) {
        double acc = b[(size_t) co];
        for (int ci = 0; ci < in.c; ++ci) for (int ky = 0; ky < k; ++ky) for (int kx = 0; kx < k; ++kx) {
            const int x = ox * stride + kx - pad, y = oy * stride + ky - pad;
            if (x >= 0 && x < in.w && y >= 0 && y < in.h) acc += w[(size_t) (kx + k * (ky + k * (ci + in.c * co)))] * in.at(x, y, ci);
        }
        out.at(ox, oy, co) = acc;
    }
    return out;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// GroupNorm: each group of c / G channels normalized over all its values, then the channel's
// weight and bias; SiLU after it when asked.
image ref_group_norm(const image & in, int G, const unet::norm_params & n, double eps, bool then_silu) {
    const vec w = P(n.w), b = P(n.b);
    const int per = in.c / G;
    const size_t plane = (size_t) in.w * in.h;
    image out(in.w, in.h, in.c);
    for (int g = 0; g < G; ++g) {
        const size_t first = (size_t) g * per * plane, count = (size_t) per * plane;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < count; ++i) mean += in.v[first + i];
        mean /= (double) count;
        for (size_t i = 0; i < count; ++i) var += (in.v[first + i] - mean) * (in.v[first + i] - mean);
        var /= (double) count;
        for (size_t i = 0; i < count; ++i) {
            const size_t ch = (first + i) / plane;
            const double y = (in.v[first + i] - mean) / std::sqrt(var + eps) * w[ch] + b[ch];
            out.v[first + i] = then_silu ? silu(y) : y;
        }
    }
    return out;
}

// y = W x + b, W ggml [n_in, n_out] (row o at o * n_in)
vec ref_linear(const vec & x, const exw::param & W, const exw::param & b) {
    const size_t n_in = x.size(), n_out = (size_t) W.t->ne[1];
    vec y(n_out);
    for (size_t o = 0; o < n_out; ++o) {
        double acc = b.host[o];
        for (size_t i = 0; i < n_in; ++i) acc += (double) W.host[o * n_in + i] * x[i];
        y[o] = acc;
    }
    return y;
}

vec silu_all(vec x) { for (double & v : x) v = silu(v); return x; }

image add(image a, const image & b) { for (size_t i = 0; i < a.v.size(); ++i) a.v[i] += b.v[i]; return a; }

image ref_res(const image & x, const unet::res_params & r, const vec & temb, int G, double eps) {
    image h = ref_conv(ref_group_norm(x, G, r.norm1, eps, true), r.conv1, 1);
    const vec t = ref_linear(silu_all(temb), r.temb_w, r.temb_b);
    for (int c = 0; c < h.c; ++c) for (int y = 0; y < h.h; ++y) for (int xx = 0; xx < h.w; ++xx) h.at(xx, y, c) += t[(size_t) c];
    h = ref_conv(ref_group_norm(h, G, r.norm2, eps, true), r.conv2, 1);
    return add(r.cin == r.cout ? x : ref_conv(x, r.skip, 1), h);
}

// Self-attention over the image's positions (token n = x + w*y), heads split the channels.
image ref_attention(const image & in, const unet::attn_params & a, int G, int H, double eps) {
    const image nx = ref_group_norm(in, G, a.norm, eps, false);
    const int N = in.w * in.h, C = in.c, hd = C / H;
    std::vector<vec> q, k, v;
    for (int n = 0; n < N; ++n) {
        vec tok((size_t) C);
        for (int c = 0; c < C; ++c) tok[(size_t) c] = nx.v[(size_t) c * N + n];
        q.push_back(ref_linear(tok, a.q_w, a.q_b));
        k.push_back(ref_linear(tok, a.k_w, a.k_b));
        v.push_back(ref_linear(tok, a.v_w, a.v_b));
    }
    image out = in;
    for (int n = 0; n < N; ++n) {
        vec o((size_t) C, 0.0);
        for (int h = 0; h < H; ++h) {
            vec s((size_t) N);
            double top = -1e300, sum = 0.0;
            for (int m = 0; m < N; ++m) {
                double d = 0.0;
                for (int c = h * hd; c < (h + 1) * hd; ++c) d += q[(size_t) n][(size_t) c] * k[(size_t) m][(size_t) c];
                s[(size_t) m] = d / std::sqrt((double) hd);
                top = std::max(top, s[(size_t) m]);
            }
            for (double & e : s) { e = std::exp(e - top); sum += e; }
            for (int m = 0; m < N; ++m) for (int c = h * hd; c < (h + 1) * hd; ++c) o[(size_t) c] += s[(size_t) m] / sum * v[(size_t) m][(size_t) c];
        }
        const vec proj = ref_linear(o, a.out_w, a.out_b);
        for (int c = 0; c < C; ++c) out.v[(size_t) c * N + n] += proj[(size_t) c];
    }
    return out;
}

// The network in double on the model's generated weights.
vec ref_unet(const unet::model & m, const std::vector<float> & latent, float t) {
    const unet::hparams & hp = m.hp;
    const int G = hp.n_groups, half = hp.ch / 2;
    const double eps = hp.eps;
    vec temb((size_t) hp.ch);
    for (int j = 0; j < half; ++j) {
        const double f = std::exp(-std::log((double) hp.max_period) * j / half);
        temb[(size_t) j] = std::cos(t * f);
        temb[(size_t) (j + half)] = std::sin(t * f);
    }
    temb = ref_linear(silu_all(ref_linear(temb, m.temb1_w, m.temb1_b)), m.temb2_w, m.temb2_b);

    image x(hp.width, hp.height, hp.in_ch);
    x.v.assign(latent.begin(), latent.end());
    const image skip = ref_res(ref_conv(x, m.conv_in, 1), m.res_hi, temb, G, eps);
    const image low = ref_attention(ref_res(ref_conv(skip, m.down, 2), m.res_lo, temb, G, eps), m.attn, G, hp.n_head, eps);
    image up(hp.width, hp.height, low.c);
    for (int c = 0; c < up.c; ++c) for (int y = 0; y < up.h; ++y) for (int xx = 0; xx < up.w; ++xx) up.at(xx, y, c) = low.at(xx / 2, y / 2, c);
    up = ref_conv(up, m.up, 1);
    image cat(hp.width, hp.height, up.c + skip.c);
    std::copy(up.v.begin(), up.v.end(), cat.v.begin());
    std::copy(skip.v.begin(), skip.v.end(), cat.v.begin() + (long) up.v.size());
    const image h = ref_res(cat, m.res_up, temb, G, eps);
    return ref_conv(ref_group_norm(h, G, m.norm_out, eps, true), m.conv_out, 1).v;
}

// One step on backends (weights on the first) against the reference.
void check_unet(const std::vector<tsr_backend_t> & backends, double max_nmse, unet::session & s) {
    const unet::hparams hp = tiny_hparams();
    std::string err;
    unet::model m;
    REQUIRE_OK(unet::init_model(m, hp, 11, backends.front(), err));
    REQUIRE_OK(unet::session_init(s, m, backends, err));
    std::vector<float> x((size_t) hp.width * hp.height * hp.in_ch);
    exw::rng r(12);
    for (float & v : x) v = r.uniform(-1.5f, 1.5f);
    const float t = 37.0f;
    std::vector<float> out;
    REQUIRE_OK(unet::predict(s, x, t, out, err));
    REQUIRE(out.size() == x.size());
    const double e = tsrt::nmse(vec(out.begin(), out.end()), ref_unet(m, x, t));
    INFO("nmse " << e);
    CHECK(e < max_nmse);
}

} // namespace

TEST_CASE("unet block: CPU output matches a double-precision reference, compute buffer at its lower bound", "[unet]") {
    tsrt::backend_holder cpu(2);
    unet::session s;
    check_unet({cpu.be}, 1e-10, s);   // measured ~2e-13; nearest -> bilinear upscale gives ~0.2
    exw_test::check_plans_at_lower_bound(s.g);
    CHECK(s.g.n_splits == 1);
}

// A device without GroupNorm, upscale and the timestep embedding: the scheduler runs those on
// the CPU, copying what crosses, and the numbers are the same.
TEST_CASE("unet block: ops a backend lacks fall back to the CPU through the scheduler", "[unet][sched]") {
    tsrt::backend_holder cpu(2);
    tsrt::masked_backend gpu(cpu.be, "NoNorm", [](const tsr_tensor * t) {
        return t->op == TSR_OP_GROUP_NORM || t->op == TSR_OP_UPSCALE || t->op == TSR_OP_TIMESTEP_EMBEDDING;
    });
    unet::session s;
    check_unet({gpu, cpu.be}, 1e-10, s);
    exw_test::check_cut(s.g, 3);
    // every node the device declined ran on the CPU: GroupNorm twice in each of 3 ResBlocks, in the
    // attention and before the output conv; the convolutions stayed on the device
    const std::map<std::string, int> on_cpu = exw::ops_on(s.g, cpu.be), on_gpu = exw::ops_on(s.g, gpu);
    CHECK(on_cpu.at("GROUP_NORM") == 8);
    CHECK(on_cpu.at("UPSCALE") == 1);
    CHECK(on_cpu.at("TIMESTEP_EMBEDDING") == 1);
    for (const char * op : {"GROUP_NORM", "UPSCALE", "TIMESTEP_EMBEDDING"}) CHECK(on_gpu.count(op) == 0);
    CHECK(on_gpu.at("CONV_2D") == 12);
}

TEST_CASE("unet block: on Vulkan (with the CPU for what it lacks) it matches the reference", "[unet][vulkan]") {
    tsr::backend vk(exw_test::open_vulkan());
    if (!vk.get()) return;
    tsrt::backend_holder cpu(2);
    unet::session s;
    check_unet({vk.get(), cpu.be}, 1e-6, s);   // a GPU may accumulate in f16
}

TEST_CASE("unet block: bad hyper-parameters and input are refused with the values named", "[unet]") {
    std::string err;
    unet::hparams hp = tiny_hparams();
    hp.width = 5;
    CHECK_FALSE(unet::check_hparams(hp, err));
    CHECK(err == "width x height = 5 x 4 must be even (down- then up-sampled by 2)");
    hp = tiny_hparams();
    hp.n_groups = 3;
    CHECK_FALSE(unet::check_hparams(hp, err));
    CHECK(err == "n_groups = 3 does not divide ch = 8");
    hp = tiny_hparams();
    hp.n_head = 3;
    CHECK_FALSE(unet::check_hparams(hp, err));
    CHECK(err == "n_head = 3 does not divide the attention's 2 x ch = 16 channels");

    tsrt::backend_holder cpu(1);
    unet::model m;
    REQUIRE_OK(unet::init_model(m, tiny_hparams(), 1, cpu.be, err));
    unet::session s;
    REQUIRE_OK(unet::session_init(s, m, {cpu.be}, err));
    std::vector<float> out;
    CHECK_FALSE(unet::predict(s, std::vector<float>(7), 1.0f, out, err));
    CHECK(err == "latent input has 7 values, expected width x height x in_ch = 6 x 4 x 3 = 72");
    CHECK_FALSE(unet::predict(s, std::vector<float>(72), NAN, out, err));
    CHECK(err.find("is not finite") != std::string::npos);
}
