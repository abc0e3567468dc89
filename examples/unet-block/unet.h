// unet.h - a small diffusion U-Net (Stable Diffusion's building blocks) from tessera ops,
// with generated weights: one denoising step's network on a latent image.
//
//   t -> timestep_embedding(ch) -> linear(4ch) -> SiLU -> linear(4ch)        = temb
//   x [W, H, in_ch] -> conv 3x3 -> [W, H, ch]
//     res(ch -> ch, temb)                               = skip
//     conv 3x3 stride 2 (down)      -> [W/2, H/2, ch]
//     res(ch -> 2ch, temb), self-attention (n_head heads over the W/2 x H/2 positions)
//     upscale x2 (nearest), conv 3x3 -> [W, H, 2ch]
//     concat(skip) on channels      -> [W, H, 3ch]
//     res(3ch -> ch, temb)
//   GroupNorm, SiLU, conv 3x3       -> [W, H, in_ch]   (the predicted noise)
//
//   res(x, cin -> cout) = skip(x) + conv(SiLU(GN(h))), h = conv(SiLU(GN(x))) + linear(SiLU(temb));
//   skip a 1x1 convolution when cin != cout. GN: group_norm with n_groups and a per-channel
//   weight and bias. Every convolution has a bias; tensors are [W, H, C, 1] (ne[0] innermost).
#pragma once

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "../common/args.h"
#include "../common/graph_session.h"
#include "../common/seeded_weights.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace unet {

struct hparams {
    int width = 64, height = 64;   // the latent of a 512 x 512 image in Stable Diffusion
    int in_ch = 4;
    int ch = 64;                   // base channels (Stable Diffusion: 320)
    int n_groups = 32;             // GroupNorm groups everywhere (dividing ch, so 2ch and 3ch too), as in Stable Diffusion
    int n_head = 4;                // attention heads over the 2ch channels
    float eps = 1e-5f;
    int max_period = 10000;        // of the timestep embedding

    int temb_dim() const { return 4 * ch; }
};

constexpr int k_max_side = 1 << 12;
constexpr int k_max_ch = 1 << 12;

// false + a message naming the bad value
inline bool check_hparams(const hparams & hp, std::string & err) {
    auto in_range = [&](const char * name, int v, int lo, int hi) { return exw::check_range(name, v, lo, hi, err); };
    if (!in_range("width", hp.width, 2, k_max_side) || !in_range("height", hp.height, 2, k_max_side) ||
        !in_range("in_ch", hp.in_ch, 1, k_max_ch) || !in_range("ch", hp.ch, 2, k_max_ch) || !in_range("n_groups", hp.n_groups, 1, hp.ch) ||
        !in_range("n_head", hp.n_head, 1, 2 * hp.ch)) {
        return false;
    }
    // the upsampled half-size image must line up with the skip
    if (hp.width % 2 != 0 || hp.height % 2 != 0) {
        err = "width x height = " + std::to_string(hp.width) + " x " + std::to_string(hp.height) + " must be even (down- then up-sampled by 2)";
        return false;
    }
    if (hp.ch % hp.n_groups != 0) {
        err = "n_groups = " + std::to_string(hp.n_groups) + " does not divide ch = " + std::to_string(hp.ch);
        return false;
    }
    if (2 * hp.ch % hp.n_head != 0) {
        err = "n_head = " + std::to_string(hp.n_head) + " does not divide the attention's 2 x ch = " + std::to_string(2 * hp.ch) + " channels";
        return false;
    }
    // the sinusoidal embedding's cos and sin halves
    if (hp.ch % 2 != 0) { err = "ch = " + std::to_string(hp.ch) + " must be even (timestep embedding)"; return false; }
    return true;
}

using exw::param;

struct norm_params { param w, b; };   // GroupNorm's per-channel affine
struct conv_params { param w, b; };   // kernel [K, K, cin, cout], bias [1, 1, cout]

struct res_params {
    int cin = 0, cout = 0;
    norm_params norm1, norm2;
    conv_params conv1, conv2, skip;   // skip only when cin != cout (1x1)
    param temb_w, temb_b;             // [temb_dim, cout], [cout]
};

struct attn_params {
    norm_params norm;
    param q_w, q_b, k_w, k_b, v_w, v_b, out_w, out_b;   // [C, C], [C]
};

struct model {
    hparams hp;
    exw::weight_set weights;   // holds pointers to the params below: a model stays where it is made
    param temb1_w, temb1_b, temb2_w, temb2_b;
    conv_params conv_in, down, up, conv_out;
    res_params res_hi, res_lo, res_up;
    attn_params attn;
    norm_params norm_out;

    model() = default;
    model(const model &) = delete;
    model & operator=(const model &) = delete;
};

// Creates parameters in one weight_set, the first error kept.
struct param_maker {
    exw::weight_set & w;
    std::string & err;
    bool ok = true;

    void add(param & p, const std::string & name, std::vector<int64_t> ne, exw::fill init) {
        ok = ok && w.add(p, name, TSR_TYPE_F32, std::move(ne), init, err);
    }
    void linear(param & wt, param & b, const std::string & name, int n_in, int n_out) {
        add(wt, name + ".weight", {n_in, n_out}, exw::fan_in(n_in));
        add(b, name + ".bias", {n_out}, exw::k_bias);
    }
    void conv(conv_params & c, const std::string & name, int k, int cin, int cout) {
        add(c.w, name + ".weight", {k, k, cin, cout}, exw::fan_in(k * k * cin));
        add(c.b, name + ".bias", {1, 1, cout}, exw::k_bias);
    }
    void norm(norm_params & n, const std::string & name, int c) {
        add(n.w, name + ".weight", {1, 1, c}, exw::k_gain);
        add(n.b, name + ".bias", {1, 1, c}, exw::k_bias);
    }
    void res(res_params & r, const std::string & name, int cin, int cout, int temb_dim) {
        r.cin = cin;
        r.cout = cout;
        norm(r.norm1, name + ".norm1", cin);
        conv(r.conv1, name + ".conv1", 3, cin, cout);
        linear(r.temb_w, r.temb_b, name + ".time_emb_proj", temb_dim, cout);
        norm(r.norm2, name + ".norm2", cout);
        conv(r.conv2, name + ".conv2", 3, cout, cout);
        if (cin != cout) conv(r.skip, name + ".conv_shortcut", 1, cin, cout);
    }
    void attention(attn_params & a, const std::string & name, int c) {
        norm(a.norm, name + ".group_norm", c);
        linear(a.q_w, a.q_b, name + ".to_q", c, c);
        linear(a.k_w, a.k_b, name + ".to_k", c, c);
        linear(a.v_w, a.v_b, name + ".to_v", c, c);
        linear(a.out_w, a.out_b, name + ".to_out", c, c);
    }
};

constexpr size_t k_max_params = 58;   // what create_params makes (its context holds exactly these)

inline bool create_params(model & m, std::string & err) {
    const hparams & hp = m.hp;
    const int c = hp.ch, td = hp.temb_dim();
    if (!m.weights.reserve(k_max_params, err)) return false;
    param_maker mk{m.weights, err};
    mk.linear(m.temb1_w, m.temb1_b, "time_embedding.linear_1", c, td);
    mk.linear(m.temb2_w, m.temb2_b, "time_embedding.linear_2", td, td);
    mk.conv(m.conv_in, "conv_in", 3, hp.in_ch, c);
    mk.res(m.res_hi, "down.res", c, c, td);
    mk.conv(m.down, "down.downsample", 3, c, c);
    mk.res(m.res_lo, "mid.res", c, 2 * c, td);
    mk.attention(m.attn, "mid.attn", 2 * c);
    mk.conv(m.up, "up.upsample", 3, 2 * c, 2 * c);
    mk.res(m.res_up, "up.res", 3 * c, c, td);
    mk.norm(m.norm_out, "conv_norm_out", c);
    mk.conv(m.conv_out, "conv_out", 3, c, hp.in_ch);
    return mk.ok;
}

// Generate the weights and put them in a WEIGHTS buffer of `backend` (m: a fresh model).
inline bool init_model(model & m, const hparams & hp, uint64_t seed, tsr_backend_t backend, std::string & err) {
    if (!check_hparams(hp, err)) return false;
    m.hp = hp;
    return create_params(m, err) && m.weights.generate_and_upload(backend, seed, err);
}

// ---- the graph ------------------------------------------------------------------------------

struct graph_io {
    tsr_cgraph * gf = nullptr;
    tsr_tensor * x = nullptr;     // input  [W, H, in_ch, 1]
    tsr_tensor * t = nullptr;     // input  [1]: the timestep
    tsr_tensor * out = nullptr;   // output [W, H, in_ch, 1]
};

// The network has about 110 nodes whatever its sizes.
constexpr size_t k_graph_size = TSR_DEFAULT_GRAPH_SIZE;

// The network's graph in ctx (a no_alloc context of k_graph_size tensors and one graph).
inline bool build_graph(tsr_context * ctx, const model & m, graph_io & io, std::string & err) {
    const hparams & hp = m.hp;
    bool ok = true;
    // every op result is checked once through this: the first failure is the message
    auto chk = [&](tsr_tensor * t, const char * what) -> tsr_tensor * {
        if (!t && ok) { ok = false; err = std::string("building ") + what + ": " + tsr_last_error(); }
        return ok ? t : nullptr;
    };
    auto linear = [&](tsr_tensor * x, const param & w, const param & b) -> tsr_tensor * {
        x = ok ? chk(tsr_mul_mat(ctx, w.t, x), "linear") : nullptr;
        return ok ? chk(tsr_add(ctx, x, b.t), "linear bias") : nullptr;
    };
    auto conv = [&](tsr_tensor * x, const conv_params & c, int stride) -> tsr_tensor * {
        if (!ok) return nullptr;
        const int pad = (int) c.w.t->ne[0] / 2;
        x = ok ? chk(tsr_conv_2d(ctx, c.w.t, x, stride, stride, pad, pad, 1, 1), "conv_2d") : nullptr;
        return ok ? chk(tsr_add(ctx, x, c.b.t), "conv bias") : nullptr;
    };
    auto group_norm = [&](tsr_tensor * x, const norm_params & n) -> tsr_tensor * {
        x = ok ? chk(tsr_group_norm(ctx, x, hp.n_groups, hp.eps), "group_norm") : nullptr;
        x = ok ? chk(tsr_mul(ctx, x, n.w.t), "group_norm weight") : nullptr;
        return ok ? chk(tsr_add(ctx, x, n.b.t), "group_norm bias") : nullptr;
    };
    auto norm_silu = [&](tsr_tensor * x, const norm_params & n) -> tsr_tensor * {
        x = group_norm(x, n);
        return ok ? chk(tsr_silu(ctx, x), "silu") : nullptr;
    };
    // [C, 1] -> [1, 1, C, 1]: one value per channel, broadcast over the image
    auto per_channel = [&](tsr_tensor * v) { return ok && v ? chk(tsr_reshape_4d(ctx, v, 1, 1, v->ne[0], 1), "per channel") : nullptr; };
    tsr_tensor * temb = nullptr;
    auto res = [&](tsr_tensor * x, const res_params & r) -> tsr_tensor * {
        tsr_tensor * h = conv(norm_silu(x, r.norm1), r.conv1, 1);
        tsr_tensor * tproj = linear(ok ? chk(tsr_silu(ctx, temb), "silu") : nullptr, r.temb_w, r.temb_b);
        h = ok ? chk(tsr_add(ctx, h, per_channel(tproj)), "time embedding") : nullptr;
        h = conv(norm_silu(h, r.norm2), r.conv2, 1);
        tsr_tensor * skip = r.cin == r.cout ? x : conv(x, r.skip, 1);   // 1x1: padding 0
        return ok ? chk(tsr_add(ctx, skip, h), "residual") : nullptr;
    };
    // [w, h, C, 1] <-> [C, w*h] (channels innermost: one token per position)
    auto to_tokens = [&](tsr_tensor * x) -> tsr_tensor * {
        if (!ok) return nullptr;
        x = ok ? chk(tsr_reshape_2d(ctx, x, x->ne[0] * x->ne[1], x->ne[2]), "tokens") : nullptr;
        return ok ? chk(tsr_cont(ctx, tsr_transpose(ctx, x)), "tokens transpose") : nullptr;
    };
    auto attention = [&](tsr_tensor * x, const attn_params & a) -> tsr_tensor * {
        if (!ok) return nullptr;
        const int64_t w = x->ne[0], h = x->ne[1], C = x->ne[2], N = w * h, hd = C / hp.n_head;
        tsr_tensor * tok = to_tokens(group_norm(x, a.norm));
        auto heads = [&](tsr_tensor * t) -> tsr_tensor * {
            t = ok ? chk(tsr_reshape_3d(ctx, t, hd, hp.n_head, N), "heads") : nullptr;
            return ok ? chk(tsr_permute(ctx, t, 0, 2, 1, 3), "heads permute") : nullptr;   // [hd, N, n_head]
        };
        tsr_tensor * q = heads(linear(tok, a.q_w, a.q_b));
        tsr_tensor * k = heads(linear(tok, a.k_w, a.k_b));
        tsr_tensor * v = heads(linear(tok, a.v_w, a.v_b));
        tsr_tensor * o = ok ? chk(tsr_flash_attn_ext(ctx, q, k, v, nullptr, 1.0f / std::sqrt((float) hd), 0.0f, 0.0f), "attention") : nullptr;
        o = ok ? chk(tsr_reshape_2d(ctx, o, C, N), "attention merge") : nullptr;
        o = linear(o, a.out_w, a.out_b);   // [C, N]
        o = ok ? chk(tsr_cont(ctx, tsr_transpose(ctx, o)), "image transpose") : nullptr;
        o = ok ? chk(tsr_reshape_4d(ctx, o, w, h, C, 1), "image") : nullptr;
        return ok ? chk(tsr_add(ctx, x, o), "attention residual") : nullptr;
    };

    io = graph_io();
    io.gf = tsr_new_graph_custom(ctx, k_graph_size, false);
    if (!io.gf) { err = std::string("new graph: ") + tsr_last_error(); return false; }
    io.x = chk(tsr_new_tensor_4d(ctx, TSR_TYPE_F32, hp.width, hp.height, hp.in_ch, 1), "latent input");
    io.t = ok ? chk(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1), "timestep input") : nullptr;
    if (!ok) return false;
    tsr_set_name(io.x, "latent");
    tsr_set_name(io.t, "timestep");
    tsr_set_input(io.x);
    tsr_set_input(io.t);

    temb = chk(tsr_timestep_embedding(ctx, io.t, hp.ch, hp.max_period), "timestep_embedding");
    temb = linear(temb, m.temb1_w, m.temb1_b);
    temb = ok ? chk(tsr_silu(ctx, temb), "silu") : nullptr;
    temb = linear(temb, m.temb2_w, m.temb2_b);

    tsr_tensor * skip = res(conv(io.x, m.conv_in, 1), m.res_hi);
    tsr_tensor * x = attention(res(conv(skip, m.down, 2), m.res_lo), m.attn);
    x = ok ? chk(tsr_upscale(ctx, x, 2, TSR_SCALE_MODE_NEAREST), "upscale") : nullptr;
    x = conv(x, m.up, 1);
    x = ok ? chk(tsr_concat(ctx, x, skip, 2), "concat skip") : nullptr;
    x = res(x, m.res_up);
    io.out = conv(norm_silu(x, m.norm_out), m.conv_out, 1);
    if (!ok) return false;
    tsr_set_name(io.out, "noise_pred");
    tsr_set_output(io.out);
    if (!tsr_build_forward_expand(io.gf, io.out)) { err = std::string("graph too small: ") + tsr_last_error(); return false; }
    return true;
}

// ---- running it -----------------------------------------------------------------------------

// The network's graph planned on its backends.
struct session {
    const model * m = nullptr;
    exw::graph_session g;
    graph_io io;
};

// Build the graph and plan every backend's compute buffer for it (s: a fresh session).
// backends: the model's backend first, then (for a GPU) the CPU.
inline bool session_init(session & s, const model & m, const std::vector<tsr_backend_t> & backends, std::string & err) {
    s.m = &m;
    return exw::plan_graph(s.g, backends, k_graph_size, [&](tsr_context * ctx, std::string & e) {
        return build_graph(ctx, m, s.io, e) ? s.io.gf : nullptr;
    }, err);
}

// The noise predicted for latent x (in_ch planes of height rows of width values) at timestep t.
inline bool predict(session & s, const std::vector<float> & x, float t, std::vector<float> & out, std::string & err) {
    const hparams & hp = s.m->hp;
    const size_t want = (size_t) hp.width * hp.height * hp.in_ch;
    if (x.size() != want) {
        err = "latent input has " + std::to_string(x.size()) + " values, expected width x height x in_ch = " + std::to_string(hp.width) +
              " x " + std::to_string(hp.height) + " x " + std::to_string(hp.in_ch) + " = " + std::to_string(want);
        return false;
    }
    if (!std::isfinite(t)) { err = "timestep " + std::to_string(t) + " is not finite"; return false; }
    auto set_inputs = [&]() {
        return tsr_backend_tensor_set(s.io.x, x.data(), 0, want * sizeof(float)) && tsr_backend_tensor_set(s.io.t, &t, 0, sizeof t);
    };
    return exw::run_graph(s.g, set_inputs, s.io.out, out, err);
}

// Multiply-adds x 2 of one run: the convolutions, the time-embedding and attention projections,
// attention itself.
inline double flops(const hparams & hp) {
    const double px = (double) hp.width * hp.height, lo = px / 4.0, c = hp.ch, td = hp.temb_dim();
    auto conv = [](double pixels, double k, double cin, double cout) { return 2.0 * pixels * k * k * cin * cout; };
    auto res = [&](double pixels, double cin, double cout) {
        return conv(pixels, 3, cin, cout) + conv(pixels, 3, cout, cout) + (cin != cout ? conv(pixels, 1, cin, cout) : 0.0) + 2.0 * td * cout;
    };
    const double temb = 2.0 * (c * td + td * td);
    const double attn = 2.0 * 4.0 * lo * (2 * c) * (2 * c) + 2.0 * 2.0 * lo * lo * (2 * c);
    return temb + conv(px, 3, hp.in_ch, c) + res(px, c, c) + conv(lo, 3, c, c) + res(lo, c, 2 * c) + attn + conv(px, 3, 2 * c, 2 * c) +
           res(px, 3 * c, c) + conv(px, 3, c, hp.in_ch);
}

} // namespace unet
