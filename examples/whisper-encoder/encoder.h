// encoder.h - a Whisper-style audio encoder built from tessera ops (Whisper's AudioEncoder:
// openai/whisper model.py, whisper.cpp's whisper_build_graph_encoder), with generated weights.
//
//   log-mel [n_frames, n_mel]            (ne[0] innermost: each mel bin's frames are contiguous)
//   conv_1d(k 3, pad 1) + bias, GELU     -> [n_frames, d_model]
//   conv_1d(k 3, stride 2, pad 1) + bias, GELU -> [n_ctx, d_model], n_ctx = (n_frames - 1) / 2 + 1
//   transpose, + sinusoidal positions    -> [d_model, n_ctx]
//   n_layer pre-LN blocks: x += out(attn(LN(x))); x += fc2(GELU(fc1(LN(x))))
//     (q and v projections biased, k not; no mask: every frame sees every frame)
//   final LN                             -> [d_model, n_ctx]
//
// GELU is the exact (erf) one, as PyTorch's nn.GELU in Whisper. The weights are generated
// from a seed (a real program reads them from a file); each parameter keeps its generated
// values on the host so a test can run a reference on the very same numbers.
#pragma once

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/sched.h"
#include "../common/args.h"
#include "../common/graph_session.h"
#include "../common/seeded_weights.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace wenc {

struct hparams {
    int n_mel = 80;
    int n_frames = 3000;   // 30 s of audio at Whisper's 10 ms hop
    int d_model = 384;     // Whisper tiny's width, heads and layers
    int n_head = 6;
    int n_layer = 4;
    int n_ff = 0;          // 0: 4 * d_model
    float eps = 1e-5f;     // PyTorch LayerNorm's default

    int ff() const { return n_ff > 0 ? n_ff : 4 * d_model; }
    int n_ctx() const { return (n_frames - 1) / 2 + 1; }   // frames after the stride-2 conv
    int head_dim() const { return d_model / n_head; }
};

// Sizes far beyond Whisper large (d_model 1280, 32 layers, 128 mel bins) yet small enough
// that no count derived from them overflows an int.
constexpr int k_max_width = 1 << 14;
constexpr int k_max_frames = 1 << 20;
constexpr int k_max_layers = 256;

// false + a message naming the bad value
inline bool check_hparams(const hparams & hp, std::string & err) {
    auto in_range = [&](const char * name, int v, int lo, int hi) { return exw::check_range(name, v, lo, hi, err); };
    if (!in_range("n_mel", hp.n_mel, 1, k_max_width) || !in_range("n_frames", hp.n_frames, 1, k_max_frames) ||
        !in_range("d_model", hp.d_model, 2, k_max_width) || !in_range("n_head", hp.n_head, 1, hp.d_model) ||
        !in_range("n_layer", hp.n_layer, 0, k_max_layers) || !in_range("n_ff", hp.n_ff, 0, 4 * k_max_width)) {
        return false;
    }
    if (hp.d_model % hp.n_head != 0) {
        err = "n_head = " + std::to_string(hp.n_head) + " does not divide d_model = " + std::to_string(hp.d_model);
        return false;
    }
    if (hp.d_model % 2 != 0 || hp.d_model < 4) {
        // the positional table is half sines, half cosines, over d_model/2 - 1 frequency steps
        err = "d_model = " + std::to_string(hp.d_model) + " must be even and at least 4 (sinusoidal positions)";
        return false;
    }
    return true;
}

// Whisper's sinusoids(length, channels): row t is [sin(t w_0..w_{h-1}), cos(t w_0..w_{h-1})],
// w_j = 10000^(-j / (h - 1)), h = channels / 2. Row-major [length][channels].
inline std::vector<float> sinusoids(int length, int channels) {
    const int half = channels / 2;
    const double step = std::log(10000.0) / (double) (half - 1);
    std::vector<float> pe((size_t) length * (size_t) channels);
    for (int t = 0; t < length; ++t) {
        for (int j = 0; j < half; ++j) {
            const double a = (double) t * std::exp(-step * (double) j);
            pe[(size_t) t * channels + (size_t) j] = (float) std::sin(a);
            pe[(size_t) t * channels + (size_t) (half + j)] = (float) std::cos(a);
        }
    }
    return pe;
}

using exw::fan_in;
using exw::k_bias;
using exw::k_gain;
using exw::param;

struct layer_params {
    param attn_ln_w, attn_ln_b;
    param q_w, q_b, k_w, v_w, v_b, out_w, out_b;   // [d_model, d_model] each; k has no bias (Whisper)
    param mlp_ln_w, mlp_ln_b;
    param fc1_w, fc1_b, fc2_w, fc2_b;              // fc1 [d_model, n_ff], fc2 [n_ff, d_model]
};

struct model {
    hparams hp;
    tsr_type wtype = TSR_TYPE_F32;   // of the projection and MLP matrices
    exw::weight_set weights;         // holds pointers to the params below: a model stays where it is made
    param conv1_w, conv1_b, conv2_w, conv2_b;   // conv1 [3, n_mel, d_model], conv2 [3, d_model, d_model]; biases [1, d_model]
    param pos;                                  // [d_model, n_ctx]
    param ln_post_w, ln_post_b;
    std::vector<layer_params> layers;

    model() = default;
    model(const model &) = delete;
    model & operator=(const model &) = delete;
};

// Tensor metadata of every parameter (no data yet), with how each is generated.
inline bool create_params(model & m, std::string & err) {
    const hparams & hp = m.hp;
    const int d = hp.d_model, ff = hp.ff();
    exw::weight_set & w = m.weights;
    if (!w.reserve(7 + 15 * (size_t) hp.n_layer, err)) return false;
    const tsr_type F = TSR_TYPE_F32, W = m.wtype;
    bool ok = w.add(m.conv1_w, "conv1.weight", F, {3, hp.n_mel, d}, fan_in(3 * hp.n_mel), err) &&
              w.add(m.conv1_b, "conv1.bias", F, {1, d}, k_bias, err) &&
              w.add(m.conv2_w, "conv2.weight", F, {3, d, d}, fan_in(3 * d), err) &&
              w.add(m.conv2_b, "conv2.bias", F, {1, d}, k_bias, err) &&
              w.add(m.pos, "positional_embedding", F, {d, hp.n_ctx()}, k_bias, err);
    m.layers.resize((size_t) hp.n_layer);
    for (int il = 0; il < hp.n_layer && ok; ++il) {
        layer_params & L = m.layers[(size_t) il];
        // a [ne0, ne1] parameter of this block
        auto mk = [&](param & p, const char * what, tsr_type type, int64_t ne0, int64_t ne1, exw::fill init) {
            return w.add(p, "blocks." + std::to_string(il) + "." + what, type, {ne0, ne1}, init, err);
        };
        ok = mk(L.attn_ln_w, "attn_ln.weight", F, d, 1, k_gain) && mk(L.attn_ln_b, "attn_ln.bias", F, d, 1, k_bias) &&
             mk(L.q_w, "attn.query.weight", W, d, d, fan_in(d)) && mk(L.q_b, "attn.query.bias", F, d, 1, k_bias) &&
             mk(L.k_w, "attn.key.weight", W, d, d, fan_in(d)) && mk(L.v_w, "attn.value.weight", W, d, d, fan_in(d)) &&
             mk(L.v_b, "attn.value.bias", F, d, 1, k_bias) && mk(L.out_w, "attn.out.weight", W, d, d, fan_in(d)) &&
             mk(L.out_b, "attn.out.bias", F, d, 1, k_bias) && mk(L.mlp_ln_w, "mlp_ln.weight", F, d, 1, k_gain) &&
             mk(L.mlp_ln_b, "mlp_ln.bias", F, d, 1, k_bias) && mk(L.fc1_w, "mlp.0.weight", W, d, ff, fan_in(d)) &&
             mk(L.fc1_b, "mlp.0.bias", F, ff, 1, k_bias) && mk(L.fc2_w, "mlp.2.weight", W, ff, d, fan_in(ff)) &&
             mk(L.fc2_b, "mlp.2.bias", F, d, 1, k_bias);
    }
    return ok && w.add(m.ln_post_w, "ln_post.weight", F, {d}, k_gain, err) && w.add(m.ln_post_b, "ln_post.bias", F, {d}, k_bias, err);
}

// Generate the weights and put them in a WEIGHTS buffer of `backend` (m: a fresh model).
inline bool init_model(model & m, const hparams & hp, tsr_type wtype, uint64_t seed, tsr_backend_t backend, std::string & err) {
    if (!check_hparams(hp, err)) return false;
    if (wtype != TSR_TYPE_F32 && wtype != TSR_TYPE_F16) {
        err = std::string("weight type ") + tsr_type_name(wtype) + " is not supported (f32 or f16)";
        return false;
    }
    m.hp = hp;
    m.wtype = wtype;
    if (!create_params(m, err)) return false;
    m.pos.host = sinusoids(hp.n_ctx(), hp.d_model);   // a table, not random
    return m.weights.generate_and_upload(backend, seed, err);
}

// ---- the graph ------------------------------------------------------------------------------

struct graph_io {
    tsr_cgraph * gf = nullptr;
    tsr_tensor * mel = nullptr;   // input  [n_frames, n_mel]
    tsr_tensor * out = nullptr;   // output [d_model, n_ctx]
};

inline size_t graph_size(const hparams & hp) { return (size_t) std::max(TSR_DEFAULT_GRAPH_SIZE, 48 * hp.n_layer + 64); }

// The encoder's graph in ctx (a no_alloc context of graph_size(hp) tensors and one graph).
// flash: attention by flash_attn_ext; else mul_mat + soft_max_ext + mul_mat.
inline bool build_graph(tsr_context * ctx, const model & m, bool flash, graph_io & io, std::string & err) {
    const hparams & hp = m.hp;
    const int d = hp.d_model, H = hp.n_head, hd = hp.head_dim(), T = hp.n_ctx();
    const float kq_scale = 1.0f / std::sqrt((float) hd);
    bool ok = true;
    // every op result is checked once through this: the first failure is the message
    auto chk = [&](tsr_tensor * t, const char * what) -> tsr_tensor * {
        if (!t && ok) { ok = false; err = std::string("building ") + what + ": " + tsr_last_error(); }
        return ok ? t : nullptr;
    };
    auto layer_norm = [&](tsr_tensor * x, const param & w, const param & b) -> tsr_tensor * {
        if (!ok) return nullptr;
        x = chk(tsr_norm(ctx, x, hp.eps), "layer norm");
        if (ok) x = chk(tsr_mul(ctx, x, w.t), "layer norm weight");
        return ok ? chk(tsr_add(ctx, x, b.t), "layer norm bias") : nullptr;
    };
    auto linear = [&](tsr_tensor * x, const param & w, const param * b) -> tsr_tensor * {
        if (!ok) return nullptr;
        x = chk(tsr_mul_mat(ctx, w.t, x), "projection");
        return ok && b ? chk(tsr_add(ctx, x, b->t), "projection bias") : x;
    };
    auto conv_gelu = [&](tsr_tensor * x, const param & w, const param & b, int stride) -> tsr_tensor * {
        x = chk(tsr_conv_1d(ctx, w.t, x, stride, 1, 1), "conv_1d");
        if (ok) x = chk(tsr_add(ctx, x, b.t), "conv bias");
        return ok ? chk(tsr_gelu_erf(ctx, x), "gelu") : nullptr;
    };
    // [d, T] -> the heads as [hd, T, H]
    auto heads = [&](tsr_tensor * x) -> tsr_tensor * {
        x = ok ? chk(tsr_reshape_3d(ctx, x, hd, H, T), "heads") : nullptr;
        return ok ? chk(tsr_permute(ctx, x, 0, 2, 1, 3), "heads permute") : nullptr;
    };
    auto attention = [&](tsr_tensor * x, const layer_params & L) -> tsr_tensor * {
        tsr_tensor * q = heads(linear(x, L.q_w, &L.q_b));
        tsr_tensor * k = heads(linear(x, L.k_w, nullptr));
        tsr_tensor * v = heads(linear(x, L.v_w, &L.v_b));
        if (!ok) return nullptr;
        if (flash) {
            tsr_tensor * a = chk(tsr_flash_attn_ext(ctx, q, k, v, nullptr, kq_scale, 0.0f, 0.0f), "flash_attn_ext");  // [hd, H, T]
            return ok ? chk(tsr_reshape_2d(ctx, a, d, T), "attention merge") : nullptr;
        }
        tsr_tensor * kq = chk(tsr_mul_mat(ctx, k, q), "kq");                                // [T, T, H]
        if (ok) kq = chk(tsr_soft_max_ext(ctx, kq, nullptr, kq_scale, 0.0f), "soft_max_ext");
        tsr_tensor * vt = ok ? chk(tsr_cont(ctx, tsr_permute(ctx, v, 1, 0, 2, 3)), "V^T") : nullptr;  // [T, hd, H]
        tsr_tensor * kqv = ok ? chk(tsr_mul_mat(ctx, vt, kq), "kqv") : nullptr;             // [hd, T, H]
        return ok ? chk(tsr_cont_2d(ctx, tsr_permute(ctx, kqv, 0, 2, 1, 3), d, T), "attention merge") : nullptr;
    };

    io = graph_io();
    io.gf = tsr_new_graph_custom(ctx, graph_size(hp), false);
    if (!io.gf) { err = std::string("new graph: ") + tsr_last_error(); return false; }
    io.mel = chk(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, hp.n_frames, hp.n_mel), "mel input");
    if (!ok) return false;
    tsr_set_name(io.mel, "mel");
    tsr_set_input(io.mel);

    tsr_tensor * x = conv_gelu(io.mel, m.conv1_w, m.conv1_b, 1);         // [n_frames, d]
    x = ok ? conv_gelu(x, m.conv2_w, m.conv2_b, 2) : nullptr;             // [T, d]
    x = ok ? chk(tsr_cont(ctx, tsr_transpose(ctx, x)), "transpose") : nullptr;  // [d, T]
    x = ok ? chk(tsr_add(ctx, x, m.pos.t), "positions") : nullptr;
    for (int il = 0; il < hp.n_layer && ok; ++il) {
        const layer_params & L = m.layers[(size_t) il];
        tsr_tensor * a = linear(attention(layer_norm(x, L.attn_ln_w, L.attn_ln_b), L), L.out_w, &L.out_b);
        x = ok ? chk(tsr_add(ctx, x, a), "residual") : nullptr;
        tsr_tensor * f = linear(layer_norm(x, L.mlp_ln_w, L.mlp_ln_b), L.fc1_w, &L.fc1_b);
        f = ok ? chk(tsr_gelu_erf(ctx, f), "gelu") : nullptr;
        f = linear(f, L.fc2_w, &L.fc2_b);
        x = ok ? chk(tsr_add(ctx, x, f), "residual") : nullptr;
    }
    io.out = layer_norm(x, m.ln_post_w, m.ln_post_b);
    if (!ok) return false;
    tsr_set_name(io.out, "encoder_out");
    tsr_set_output(io.out);
    if (!tsr_build_forward_expand(io.gf, io.out)) { err = std::string("graph too small: ") + tsr_last_error(); return false; }
    return true;
}

// ---- running it -----------------------------------------------------------------------------

// The encoder's graph planned on its backends.
struct session {
    const model * m = nullptr;
    exw::graph_session g;
    graph_io io;
};

// Build the graph and plan every backend's compute buffer for it (s: a fresh session).
// backends: the model's backend first, then (for a GPU) the CPU.
inline bool session_init(session & s, const model & m, const std::vector<tsr_backend_t> & backends, bool flash, std::string & err) {
    s.m = &m;
    return exw::plan_graph(s.g, backends, graph_size(m.hp), [&](tsr_context * ctx, std::string & e) {
        return build_graph(ctx, m, flash, s.io, e) ? s.io.gf : nullptr;
    }, err);
}

// Encode one log-mel spectrogram (n_mel rows of n_frames values) into out (n_ctx rows of
// d_model values).
inline bool encode(session & s, const std::vector<float> & mel, std::vector<float> & out, std::string & err) {
    const hparams & hp = s.m->hp;
    const size_t want = (size_t) hp.n_mel * (size_t) hp.n_frames;
    if (mel.size() != want) {
        err = "log-mel input has " + std::to_string(mel.size()) + " values, expected n_mel x n_frames = " + std::to_string(hp.n_mel) +
              " x " + std::to_string(hp.n_frames) + " = " + std::to_string(want);
        return false;
    }
    auto set_mel = [&]() { return tsr_backend_tensor_set(s.io.mel, mel.data(), 0, want * sizeof(float)); };
    return exw::run_graph(s.g, set_mel, s.io.out, out, err);
}

constexpr double k_two_pi = 6.283185307179586;

// A log-mel-like spectrogram: a voice-like harmonic series whose pitch glides, formant-shaped,
// over a noise floor, scaled as Whisper's log_mel_spectrogram does (log10, floor at max - 8,
// (x + 4) / 4). n_mel rows of n_frames values.
inline std::vector<float> synthetic_log_mel(int n_mel, int n_frames, uint64_t seed) {
    exw::rng r(seed);
    std::vector<double> power((size_t) n_mel * (size_t) n_frames);
    for (int t = 0; t < n_frames; ++t) {
        const double f0 = 0.03 * n_mel * (1.0 + 0.5 * std::sin(k_two_pi * t / 400.0));   // pitch, in mel bins
        const double loud = 0.5 + 0.5 * std::sin(k_two_pi * t / 150.0) * std::sin(k_two_pi * t / 150.0);
        for (int b = 0; b < n_mel; ++b) {
            double p = 1e-6 * (1.0 + r.uniform(0.0f, 1.0f));
            for (int h = 1; h <= 8; ++h) {
                const double dist = (b - h * f0) / 1.5;
                p += loud * std::exp(-0.5 * dist * dist) / h;
            }
            power[(size_t) b * n_frames + (size_t) t] = p;
        }
    }
    double top = -1e30;
    for (double & p : power) { p = std::log10(std::max(p, 1e-10)); top = std::max(top, p); }
    std::vector<float> mel(power.size());
    for (size_t i = 0; i < power.size(); ++i) mel[i] = (float) ((std::max(power[i], top - 8.0) + 4.0) / 4.0);
    return mel;
}

} // namespace wenc
