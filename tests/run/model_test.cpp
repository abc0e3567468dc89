// The runner's model code (examples/run/graph.h) against a plain double-precision scalar
// implementation of GPT-2, LLaMA (dense and Mixtral-style mixture of experts), Qwen2, Qwen3 and Qwen3-MoE written here: tiny models with random weights are
// written to GGUF, loaded through the runner's loader and evaluated through its graph;
// the reference reads the same weights (dequantized by code in this file, with the fp16
// decoding of tests/support).
#include <catch2/catch.hpp>

#include "test_support.h"
#include "gemm_test_columns.h"

#include "backends.h"
#include "graph.h"
#include "hostile_models.h"
#include "random_model.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <unistd.h>
#include <dirent.h>
#include <algorithm>
#include <vector>

using namespace trun;

// REQUIRE with the runner's error message (err) shown on failure
#define REQUIRE_OK(expr) do { const bool ok_ = (expr); INFO(err); REQUIRE(ok_); } while (0)

namespace {

// ---- independent dequantization ---------------------------------------------------------
using tsrt::half_value;

std::vector<double> dequant(const tsr_tensor * t) {
    const int64_t n = tsr_nelements(t);
    std::vector<double> out((size_t) n);
    const uint8_t * p = (const uint8_t *) t->data;
    switch (t->type) {
        case TSR_TYPE_F32:
            for (int64_t i = 0; i < n; ++i) { float f; memcpy(&f, p + 4 * i, 4); out[(size_t) i] = f; }
            break;
        case TSR_TYPE_F16:
            for (int64_t i = 0; i < n; ++i) { uint16_t h; memcpy(&h, p + 2 * i, 2); out[(size_t) i] = half_value(h); }
            break;
        case TSR_TYPE_BF16:  // the top 16 bits of an F32
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h; memcpy(&h, p + 2 * i, 2);
                const uint32_t u = (uint32_t) h << 16;
                float f; memcpy(&f, &u, 4);
                out[(size_t) i] = f;
            }
            break;
        case TSR_TYPE_Q8_0:  // 34-byte blocks: f16 d, 32 x int8
            for (int64_t b = 0; b < n / 32; ++b) {
                const uint8_t * blk = p + 34 * b;
                uint16_t h; memcpy(&h, blk, 2);
                const double d = half_value(h);
                for (int j = 0; j < 32; ++j) out[(size_t) (32 * b + j)] = d * (int8_t) blk[2 + j];
            }
            break;
        case TSR_TYPE_Q4_0:  // 18-byte blocks: f16 d, 16 bytes; low nibbles j, high nibbles j+16
            for (int64_t b = 0; b < n / 32; ++b) {
                const uint8_t * blk = p + 18 * b;
                uint16_t h; memcpy(&h, blk, 2);
                const double d = half_value(h);
                for (int j = 0; j < 16; ++j) {
                    out[(size_t) (32 * b + j)] = d * ((blk[2 + j] & 15) - 8);
                    out[(size_t) (32 * b + j + 16)] = d * ((blk[2 + j] >> 4) - 8);
                }
            }
            break;
        default:  // the other quantized types: the format decoder of tests/support
            if (!tsr_is_quantized(t->type)) FAIL("unexpected weight type");
            out = tsrt::ref_dequantize(t->type, p, n);
    }
    return out;
}

// ---- the reference model ------------------------------------------------------------------
struct ref_model {
    hparams hp;
    std::map<std::string, std::vector<double>> w;
    // the smallest margin by which a chosen expert's router probability beat the best
    // expert not chosen, over every token and layer ref_forward saw: a model whose routing is
    // this close could route differently in float without either being wrong
    mutable double min_route_margin = 1.0;
    const std::vector<double> & operator[](const std::string & n) const {
        auto it = w.find(n);
        if (it == w.end()) FAIL("reference: missing " << n);
        return it->second;
    }
    bool has(const std::string & n) const { return w.count(n) != 0; }
};

using vec = std::vector<double>;

// y = W x for W stored as [in, out] (row r: in values), starting `at` values into W (an expert of a stack)
vec matvec(const vec & W, const vec & x, size_t out, size_t at = 0) {
    const size_t in = x.size();
    vec y(out, 0.0);
    for (size_t r = 0; r < out; ++r) {
        double s = 0;
        for (size_t i = 0; i < in; ++i) s += W[at + r * in + i] * x[i];
        y[r] = s;
    }
    return y;
}
void add_to(vec & a, const vec & b) { for (size_t i = 0; i < a.size(); ++i) a[i] += b[i]; }

vec layer_norm(const vec & x, const vec & g, const vec & b, double eps) {
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= (double) x.size();
    for (double v : x) var += (v - mean) * (v - mean);
    var /= (double) x.size();
    vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
    return y;
}
vec rms_norm(const vec & x, const vec & g, double eps) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double r = 1.0 / std::sqrt(ss / (double) x.size() + eps);
    vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * g[i];
    return y;
}
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double silu(double x) { return x / (1.0 + std::exp(-x)); }

// rotate pairs (2i, 2i+1) of the first n_rot dims (llama.cpp's "normal" RoPE)
void rope(double * x, int n_rot, int pos, double base) {
    for (int i = 0; i < n_rot / 2; ++i) {
        const double theta = pos * std::pow(base, -2.0 * i / n_rot);
        const double c = std::cos(theta), s = std::sin(theta);
        const double a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = a * s + b * c;
    }
}

// rotate pairs (i, i + n_rot/2) of the first n_rot dims (NEOX RoPE: Qwen2, Qwen3)
void rope_neox(double * x, int n_rot, int pos, double base) {
    const int half = n_rot / 2;
    for (int i = 0; i < half; ++i) {
        const double theta = pos * std::pow(base, -2.0 * i / n_rot);
        const double c = std::cos(theta), s = std::sin(theta);
        const double a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = a * s + b * c;
    }
}

// q/k/v of one position for the llama family: biases if the model has them (qwen2), each
// head RMS-normed (qwen3), then RoPE of each head
void ref_qkv(const ref_model & m, const std::string & p, const vec & h, int pos, vec & q, vec & k, vec & v) {
    const hparams & hp = m.hp;
    const size_t hd = (size_t) hp.head_dim();
    q = matvec(m[p + "attn_q.weight"], h, (size_t) hp.n_embd_q());
    k = matvec(m[p + "attn_k.weight"], h, (size_t) hp.n_embd_gqa());
    v = matvec(m[p + "attn_v.weight"], h, (size_t) hp.n_embd_gqa());
    for (const char * b : {"q", "k", "v"}) {
        const std::string bias = p + "attn_" + b + ".bias";
        if (m.has(bias)) add_to(*b == 'q' ? q : *b == 'k' ? k : v, m[bias]);
    }
    for (vec * x : {&q, &k}) {
        const std::string nw = p + (x == &q ? "attn_q_norm.weight" : "attn_k_norm.weight");
        for (size_t h0 = 0; h0 < x->size(); h0 += hd) {
            if (m.has(nw)) {
                const vec normed = rms_norm(vec(x->begin() + (long) h0, x->begin() + (long) (h0 + hd)), m[nw], hp.eps);
                std::copy(normed.begin(), normed.end(), x->begin() + (long) h0);
            }
            if (hp.a == arch::llama) rope(&(*x)[h0], hp.n_rot, pos, hp.rope_base);
            else rope_neox(&(*x)[h0], hp.n_rot, pos, hp.rope_base);
        }
    }
}

// The SwiGLU feed-forward of expert e (0 and the dense weights' names: a dense layer).
vec ref_swiglu_ffn(const ref_model & m, const std::string & p, const char * suffix, size_t e, const vec & h) {
    const size_t E = (size_t) m.hp.n_embd, F = (size_t) (m.hp.is_moe() ? m.hp.ff_exp() : m.hp.n_ff);
    const vec g = matvec(m[p + "ffn_gate" + suffix], h, F, e * F * E);
    vec u = matvec(m[p + "ffn_up" + suffix], h, F, e * F * E);
    for (size_t i = 0; i < F; ++i) u[i] *= silu(g[i]);
    return matvec(m[p + "ffn_down" + suffix], u, E, e * E * F);
}

// Mixtral's / Qwen3-MoE's feed-forward: softmax over the router's logits, the n_expert_used
// most probable experts (ties: the lower index), their probabilities renormalised to sum to 1
// as weights of their outputs.
vec ref_moe_ffn(const ref_model & m, const std::string & p, const vec & h) {
    const size_t NX = (size_t) m.hp.n_expert, NU = (size_t) m.hp.n_expert_used;
    vec prob = matvec(m[p + "ffn_gate_inp.weight"], h, NX);
    const double mx = *std::max_element(prob.begin(), prob.end());
    double sum = 0;
    for (double & v : prob) sum += (v = std::exp(v - mx));
    for (double & v : prob) v /= sum;
    std::vector<size_t> order(NX);
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return prob[a] > prob[b]; });
    if (NU < NX) m.min_route_margin = std::min(m.min_route_margin, prob[order[NU - 1]] - prob[order[NU]]);
    double chosen = 0;
    for (size_t j = 0; j < NU; ++j) chosen += prob[order[j]];
    vec out(h.size(), 0.0);
    for (size_t j = 0; j < NU; ++j) {
        const size_t e = order[j];
        const vec y = ref_swiglu_ffn(m, p, "_exps.weight", e, h);
        for (size_t i = 0; i < out.size(); ++i) out[i] += prob[e] / chosen * y[i];
    }
    return out;
}

// logits [T][n_vocab] for the whole sequence, causal
std::vector<vec> ref_forward(const ref_model & m, const std::vector<int32_t> & toks) {
    const hparams & hp = m.hp;
    const size_t E = (size_t) hp.n_embd, T = toks.size(), hd = (size_t) hp.head_dim();
    const int H = hp.n_head, Hkv = hp.n_head_kv;
    const bool gpt2 = hp.a == arch::gpt2;
    std::vector<vec> x(T, vec(E));
    for (size_t t = 0; t < T; ++t) {
        for (size_t i = 0; i < E; ++i) {
            x[t][i] = m["token_embd.weight"][(size_t) toks[t] * E + i];
            if (gpt2) x[t][i] += m["position_embd.weight"][t * E + i];
        }
    }
    for (int il = 0; il < hp.n_layer; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        std::vector<vec> q(T), k(T), v(T);
        for (size_t t = 0; t < T; ++t) {
            if (gpt2) {
                const vec h = layer_norm(x[t], m[p + "attn_norm.weight"], m[p + "attn_norm.bias"], hp.eps);
                vec qkv = matvec(m[p + "attn_qkv.weight"], h, 3 * E);
                add_to(qkv, m[p + "attn_qkv.bias"]);
                q[t].assign(qkv.begin(), qkv.begin() + (long) E);
                k[t].assign(qkv.begin() + (long) E, qkv.begin() + (long) (2 * E));
                v[t].assign(qkv.begin() + (long) (2 * E), qkv.end());
            } else {
                ref_qkv(m, p, rms_norm(x[t], m[p + "attn_norm.weight"], hp.eps), (int) t, q[t], k[t], v[t]);
            }
        }
        for (size_t t = 0; t < T; ++t) {
            vec att((size_t) hp.n_embd_q(), 0.0);
            for (int hh = 0; hh < H; ++hh) {
                const size_t kh = (size_t) (hh / (H / Hkv));
                vec sc(t + 1);
                double mx = -1e300;
                for (size_t j = 0; j <= t; ++j) {
                    double s = 0;
                    for (size_t d = 0; d < hd; ++d) s += q[t][(size_t) hh * hd + d] * k[j][kh * hd + d];
                    sc[j] = s / std::sqrt((double) hd);
                    mx = std::max(mx, sc[j]);
                }
                double sum = 0;
                for (double & s : sc) { s = std::exp(s - mx); sum += s; }
                for (size_t j = 0; j <= t; ++j) {
                    for (size_t d = 0; d < hd; ++d) att[(size_t) hh * hd + d] += sc[j] / sum * v[j][kh * hd + d];
                }
            }
            vec o = matvec(m[p + "attn_output.weight"], att, E);
            if (gpt2) add_to(o, m[p + "attn_output.bias"]);
            add_to(x[t], o);
            const size_t F = (size_t) hp.n_ff;
            vec f;
            if (gpt2) {
                const vec h = layer_norm(x[t], m[p + "ffn_norm.weight"], m[p + "ffn_norm.bias"], hp.eps);
                vec u = matvec(m[p + "ffn_up.weight"], h, F);
                add_to(u, m[p + "ffn_up.bias"]);
                for (double & e : u) e = gelu(e);
                f = matvec(m[p + "ffn_down.weight"], u, E);
                add_to(f, m[p + "ffn_down.bias"]);
            } else {
                const vec h = rms_norm(x[t], m[p + "ffn_norm.weight"], hp.eps);
                f = hp.is_moe() ? ref_moe_ffn(m, p, h) : ref_swiglu_ffn(m, p, ".weight", 0, h);
            }
            add_to(x[t], f);
        }
    }
    std::vector<vec> logits(T);
    const std::string out = m.has("output.weight") ? "output.weight" : "token_embd.weight";
    for (size_t t = 0; t < T; ++t) {
        const vec h = gpt2 ? layer_norm(x[t], m["output_norm.weight"], m["output_norm.bias"], hp.eps)
                           : rms_norm(x[t], m["output_norm.weight"], hp.eps);
        logits[t] = matvec(m[out], h, (size_t) hp.n_vocab);
        if (m.has("output.bias")) add_to(logits[t], m["output.bias"]);
    }
    return logits;
}

// ---- fixtures -------------------------------------------------------------------------------
struct tiny {
    std::string path;
    ref_model ref;
    ~tiny() { if (!path.empty()) remove(path.c_str()); }
};

hparams tiny_hparams(arch a) { return trun_test::small_hparams(a, 64); }

// A tag for file names and messages: the base type, "+mix" for a mixed model.
std::string types_tag(const weight_types & wt) {
    return std::string(tsr_type_name(wt.base)) + (wt.output != wt.base || wt.more_bits != wt.base ? "_mix" : "");
}

// gpt2: tied output (as real GPT-2); llama: separate output.weight
bool default_tied(arch a) { return a == arch::gpt2; }

// tiny_hparams(a) with 4 experts, 2 used per token (a llama: Mixtral-style)
hparams tiny_moe_hparams(arch a) {
    hparams hp = tiny_hparams(a);
    hp.n_expert = 4;
    hp.n_expert_used = 2;
    return hp;
}

void make_tiny(const hparams & hp_in, const weight_types & wtype, bool tied, tiny & out) {
    const arch a = hp_in.a;
    tokenizer tok;
    std::vector<std::string> merges;
    if (a != arch::llama) build_builtin_gpt2_vocab(60, tok, merges);  // qwen: byte-level BPE, as GPT-2's
    else build_builtin_spm_vocab(80, tok);
    hparams hp = hp_in;
    if (tsr_blck_size(wtype.base) > 32) {  // K-quants: rows of whole 256-element super-blocks
        hp.n_embd = 256;
        hp.n_ff = 512;
        if (hp.n_embd_head > 0) hp.n_embd_head = 128;  // qwen3: attn_output's rows of 4 x 128
        if (a != arch::llama) hp.n_rot = hp.head_dim();  // qwen rotates whole heads (llama keeps its partial 16)
    }
    const char * dir = getenv("TMPDIR");
    out.path = std::string(dir ? dir : "/tmp") + "/tsr_model_" + arch_name(a) + (hp.is_moe() ? "_moe_" : "_") + types_tag(wtype) + (tied ? "_tied_" : "_") +
               std::to_string((long) getpid()) + ".gguf";
    std::string err;
    tsr_context * wctx = nullptr;
    REQUIRE(write_random_model(out.path.c_str(), hp, tok, merges, wtype, tied, 777, err, &wctx));
    hp.n_vocab = tok.n_vocab();
    out.ref.hp = hp;
    for (tsr_tensor * t = tsr_get_first_tensor(wctx); t; t = tsr_get_next_tensor(wctx, t)) out.ref.w[t->name] = dequant(t);
    tsr_free(wctx);
}
void make_tiny(arch a, const weight_types & wtype, bool tied, tiny & out) { make_tiny(tiny_hparams(a), wtype, tied, out); }
void make_tiny(arch a, const weight_types & wtype, tiny & out) { make_tiny(a, wtype, default_tied(a), out); }

// max |a - b| over all logits, relative to max |b|
double rel_err(const std::vector<float> & got, const std::vector<vec> & want, size_t n_vocab) {
    double num = 0, den = 0;
    for (size_t t = 0; t < want.size(); ++t) {
        for (size_t i = 0; i < n_vocab; ++i) {
            num = std::max(num, std::fabs((double) got[t * n_vocab + i] - want[t][i]));
            den = std::max(den, std::fabs(want[t][i]));
        }
    }
    return num / den;
}

double tolerance(tsr_type t) {
    switch (t) {
        case TSR_TYPE_F32: return 2e-5;   // measured ~1e-6 (AVX2)
        case TSR_TYPE_F16: return 2e-3;   // measured ~1e-6; a kernel may round activations to F16
        case TSR_TYPE_BF16: return 2e-2;  // a kernel may round activations to BF16 (8 bits)
        default: return 4e-2;             // quantized types, measured ~2.5e-2: activations quantized to 8 bits
    }
}

struct backend_holder {
    tsr_backend_t b = nullptr;
    ~backend_holder() { tsr_backend_free(b); }
};

void make_cpu_backend(backend_holder & be, int n_threads) {
    std::string err;
    be.b = make_backend("cpu", 0, n_threads, err);
    REQUIRE_OK(be.b);
}

// 64 positions, the whole prompt in one batch, logits for every token
session_params test_params(tsr_type kv_type, bool flash) {
    session_params sp;
    sp.n_ctx = 64;
    sp.n_batch = 64;
    sp.kv_type = kv_type;
    sp.flash_attn = flash;
    sp.all_logits = true;
    return sp;
}

const char * prompt_for(arch a) { return a != arch::llama ? "The quick brown fox jumps over" : "Once upon a time there was"; }

// Greedy decoding is explained by the reference: at every position the token with the
// largest logit is one whose reference logit is within tol (relative) of the reference's best.
void check_greedy(const std::vector<float> & got, const std::vector<vec> & want, size_t n_vocab, double tol) {
    double scale = 0;
    for (const vec & w : want) for (double v : w) scale = std::max(scale, std::fabs(v));
    for (size_t t = 0; t < want.size(); ++t) {
        const float * g = got.data() + t * n_vocab;
        const size_t pick = (size_t) (std::max_element(g, g + n_vocab) - g);
        const double best = *std::max_element(want[t].begin(), want[t].end());
        INFO("position " << t << ": picked token " << pick);
        CHECK(want[t][pick] >= best - tol * scale);
    }
}

void check_against_reference(tsr_backend_t backend, const hparams & hp, const weight_types & wtype, bool tied, bool flash, tsr_type kv_type,
                             double tol) {
    const arch a = hp.a;
    tiny t;
    make_tiny(hp, wtype, tied, t);
    model m;
    std::string err;
    REQUIRE_OK(load_model(t.path.c_str(), backend, m, nullptr, nullptr, err));
    CHECK(m.hp.n_head_kv == t.ref.hp.n_head_kv);
    CHECK(m.hp.head_dim() == t.ref.hp.head_dim());
    CHECK(m.hp.rope_base == t.ref.hp.rope_base);
    CHECK((m.w.output == m.w.tok_embd) == tied);
    const std::vector<int32_t> toks = m.tok.encode(prompt_for(a), m.tok.add_bos);
    REQUIRE(toks.size() >= 5);
    const std::vector<vec> want = ref_forward(t.ref, toks);
    // routing no closer than the errors allowed, or a rounding could pick another expert
    INFO("closest routing margin " << t.ref.min_route_margin);
    REQUIRE(t.ref.min_route_margin > tol);

    const session_params sp = test_params(kv_type, flash);
    session s;
    REQUIRE_OK(session_init(s, m, backend, sp, err));
    REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
    const double e = rel_err(s.logits, want, (size_t) m.hp.n_vocab);
    INFO(arch_name(a) << " " << types_tag(wtype) << (s.sp.flash_attn ? " flash_attn" : " mul_mat+soft_max") << " kv " << tsr_type_name(kv_type)
                      << ": relative max error " << e << " (tolerance " << tol << ")");
    CHECK(e < tol);
    check_greedy(s.logits, want, (size_t) m.hp.n_vocab, tol);
    if (tsr_backend_is_cpu(backend)) CHECK(s.sp.flash_attn == flash);  // the CPU backend has every op
    CHECK(s.compute_size >= s.compute_lower_bound);
    CHECK(s.compute_lower_bound > 0);
}
void check_against_reference(tsr_backend_t backend, arch a, const weight_types & wtype, bool tied, bool flash, tsr_type kv_type,
                             double tol) {
    check_against_reference(backend, tiny_hparams(a), wtype, tied, flash, kv_type, tol);
}
void check_against_reference(tsr_backend_t backend, arch a, const weight_types & wtype, bool flash, tsr_type kv_type, double tol) {
    check_against_reference(backend, a, wtype, default_tied(a), flash, kv_type, tol);
}

size_t argmax(const float * p, size_t n) { return (size_t) (std::max_element(p, p + n) - p); }
size_t argmax(const vec & p) { return (size_t) (std::max_element(p.begin(), p.end()) - p.begin()); }

// Greedy generation token by token through the KV cache picks the reference's tokens.
void check_greedy_generation(tsr_backend_t backend, const hparams & hp, bool tied, int n_gen) {
    const arch a = hp.a;
    tiny t;
    make_tiny(hp, TSR_TYPE_F32, tied, t);
    model m;
    std::string err;
    REQUIRE_OK(load_model(t.path.c_str(), backend, m, nullptr, nullptr, err));
    std::vector<int32_t> toks = m.tok.encode(prompt_for(a), m.tok.add_bos);
    session s;
    session_params sp = test_params(TSR_TYPE_F32, true);
    sp.all_logits = false;
    REQUIRE_OK(session_init(s, m, backend, sp, err));
    REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
    const size_t V = (size_t) m.hp.n_vocab;
    for (int i = 0; i < n_gen; ++i) {
        const int32_t got = (int32_t) argmax(s.logits.data(), V);
        const int32_t want = (int32_t) argmax(ref_forward(t.ref, toks).back());
        INFO(arch_name(a) << (tied ? " tied" : " separate output") << ": generated token " << i);
        REQUIRE(got == want);
        toks.push_back(got);
        REQUIRE_OK(session_eval(s, &toks.back(), 1, err));
    }
}
void check_greedy_generation(tsr_backend_t backend, arch a, bool tied, int n_gen) {
    check_greedy_generation(backend, tiny_hparams(a), tied, n_gen);
}

} // namespace

TEST_CASE("model: tiny GPT-2 and LLaMA logits equal a double-precision reference (CPU)", "[model]") {
    backend_holder be;
    std::string err;
    be.b = make_backend("cpu", 0, 2, err);
    REQUIRE_OK(be.b);
    for (arch a : {arch::gpt2, arch::llama}) {
        for (tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_BF16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
            DYNAMIC_SECTION(arch_name(a) << " " << tsr_type_name(wt)) {
                check_against_reference(be.b, a, wt, true, TSR_TYPE_F32, tolerance(wt));
            }
        }
        DYNAMIC_SECTION(arch_name(a) << " F32, mul_mat + soft_max_ext attention") {
            check_against_reference(be.b, a, TSR_TYPE_F32, false, TSR_TYPE_F32, tolerance(TSR_TYPE_F32));
        }
        DYNAMIC_SECTION(arch_name(a) << " F32, F16 KV cache") {
            check_against_reference(be.b, a, TSR_TYPE_F32, true, TSR_TYPE_F16, 5e-3);
        }
    }
}

TEST_CASE("model: tiny Qwen2 and Qwen3, tied and separate output, equal a double-precision reference (CPU)", "[model][qwen]") {
    backend_holder be;
    make_cpu_backend(be, 2);
    for (arch a : {arch::qwen2, arch::qwen3}) {
        for (bool tied : {true, false}) {
            for (tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0}) {
                DYNAMIC_SECTION(arch_name(a) << " " << tsr_type_name(wt) << (tied ? " tied" : " separate output")) {
                    check_against_reference(be.b, a, wt, tied, true, TSR_TYPE_F32, tolerance(wt));
                }
            }
            DYNAMIC_SECTION(arch_name(a) << (tied ? " tied" : " separate output") << ": greedy tokens") {
                check_greedy_generation(be.b, a, tied, 6);
            }
        }
        DYNAMIC_SECTION(arch_name(a) << " F32, mul_mat + soft_max_ext attention") {
            check_against_reference(be.b, a, TSR_TYPE_F32, false, true, TSR_TYPE_F32, tolerance(TSR_TYPE_F32));
        }
    }
}

TEST_CASE("model: tiny mixtures of experts (Mixtral-style llama, qwen3moe) equal a double-precision reference (CPU)", "[model][moe]") {
    backend_holder be;
    make_cpu_backend(be, 2);
    for (arch a : {arch::llama, arch::qwen3moe}) {
        const hparams hp = tiny_moe_hparams(a);
        // F32, and F16 where the routing margins allow a kernel's F16 activations (llama's 3e-3,
        // not qwen3moe's 9e-5); not the quantized types: their 8-bit activations move router
        // probabilities by more than a tiny random model's closest margins, so a token may take
        // another expert (mul_mat_id's kernels for every type: tests/cpu/models_test.cpp)
        for (tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            if (wt == TSR_TYPE_F16 && a == arch::qwen3moe) continue;
            DYNAMIC_SECTION(arch_name(a) << " " << tsr_type_name(wt) << ": a prompt in one batch") {
                check_against_reference(be.b, hp, wt, false, true, TSR_TYPE_F32, tolerance(wt));
            }
        }
        DYNAMIC_SECTION(arch_name(a) << ": greedy tokens, one at a time") {
            check_greedy_generation(be.b, hp, false, 6);
        }
    }
    SECTION("llama, one expert per token: its output unweighted, no sum") {
        hparams hp = tiny_moe_hparams(arch::llama);
        hp.n_expert_used = 1;
        check_against_reference(be.b, hp, TSR_TYPE_F32, false, true, TSR_TYPE_F32, tolerance(TSR_TYPE_F32));
    }
}

// The loader reads what makes qwen2/qwen3 differ from llama, under llama.cpp's names.
TEST_CASE("model: qwen2 and qwen3 files hold their keys and tensors under llama.cpp's names", "[model][qwen]") {
    for (arch a : {arch::qwen2, arch::qwen3}) {
        tiny t;
        make_tiny(a, TSR_TYPE_F32, false, t);
        tsr_gguf_context * g = tsr_gguf_init_from_file(t.path.c_str(), tsr_gguf_init_params{true, nullptr});
        REQUIRE(g);
        const std::string an = arch_name(a);
        CHECK(std::string(tsr_gguf_get_val_str(g, tsr_gguf_find_key(g, "general.architecture"))) == an);
        CHECK(tsr_gguf_find_key(g, (an + ".block_count").c_str()) >= 0);
        CHECK(tsr_gguf_find_key(g, (an + ".rope.freq_base").c_str()) >= 0);
        const bool q2 = a == arch::qwen2;
        CHECK((tsr_gguf_find_tensor(g, "blk.1.attn_q.bias") >= 0) == q2);
        CHECK((tsr_gguf_find_tensor(g, "blk.1.attn_v.bias") >= 0) == q2);
        CHECK((tsr_gguf_find_tensor(g, "blk.1.attn_k_norm.weight") >= 0) == !q2);
        if (!q2) {  // 4 heads of 32 in a 64-wide model: the key says so, attn_q is 128 wide
            CHECK(tsr_gguf_get_val_u32(g, tsr_gguf_find_key(g, "qwen3.attention.key_length")) == 32);
            CHECK(tsr_gguf_get_tensor_ne(g, tsr_gguf_find_tensor(g, "blk.0.attn_q.weight"), 1) == 128);
            CHECK(tsr_gguf_get_tensor_ne(g, tsr_gguf_find_tensor(g, "blk.0.attn_output.weight"), 0) == 128);
        }
        tsr_gguf_free(g);
    }
}

// The CPU backend runs mapped weights (32-byte aligned in the file, not 64 as in its own
// buffers) to the same logits, bit for bit, as weights read into memory.
TEST_CASE("model: weights mapped in place give the logits of weights read into memory (CPU)", "[model][mmap]") {
    backend_holder be;
    make_cpu_backend(be, 2);
    for (arch a : {arch::llama, arch::qwen3}) {
        for (tsr_type wt : {TSR_TYPE_F16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
            DYNAMIC_SECTION(arch_name(a) << " " << tsr_type_name(wt)) {
                tiny t;
                make_tiny(a, wt, false, t);
                std::string err;
                model read, mapped;
                REQUIRE_OK(load_model(t.path.c_str(), be.b, read, nullptr, nullptr, err, false));
                REQUIRE_OK(load_model(t.path.c_str(), be.b, mapped, nullptr, nullptr, err, true));
                CHECK_FALSE(read.mapped);
                INFO(mapped.not_mapped_why);
                REQUIRE(mapped.mapped);
                CHECK(tsr_backend_buffer_get_size(mapped.buf_w) == mapped.file_size);
                const std::vector<int32_t> toks = mapped.tok.encode(prompt_for(a), mapped.tok.add_bos);
                std::vector<float> logits[2];
                for (int i = 0; i < 2; ++i) {
                    session s;
                    REQUIRE_OK(session_init(s, i ? mapped : read, be.b, test_params(TSR_TYPE_F32, true), err));
                    REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
                    logits[i] = s.logits;
                }
                CHECK(logits[0] == logits[1]);
                CHECK(rel_err(logits[1], ref_forward(t.ref, toks), (size_t) mapped.hp.n_vocab) < tolerance(wt));
                // a weight cannot be overwritten through the API
                const float zero = 0.0f;
                CHECK_FALSE(tsr_backend_tensor_set(mapped.w.out_norm, &zero, 0, sizeof zero));
            }
        }
    }
}

// CPU_REPACK (tessera-run's default): the Q4_0 / IQ4_NL / Q4_K matrices are interleaved in it,
// Q5_0 / Q3_K / Q2_K where the CPU has AVX2 (Q2_K in its word layout where it has AVX-512 VNNI), Q5_K and Q4_1 / Q5_1 where AVX2 is its best (mapped: moved into
// it, the rest stays mapped; read: every weight in it); other types keep their bytes. The prompt's logits (GEMM, at 130 tokens for every type: panels equal to the file packer's) equal the plain
// weights' bit for bit; the next token's (the interleaved mat-vec: the same int32 block sums,
// float sums in another order) within 1e-4 of the largest logit where both mat-vecs add their
// floats in nearly the same order, and within the 8-bit activations' noise otherwise: a
// last-bit difference moves the next layer's quantized activation across a rounding boundary
// now and then, a step of 1/127 of its block's largest value, and the tiny model carries it
// on. On AVX-512 the file layout's Q3_K kernel takes its level offset off in float at the end,
// the record's in integers: rows within 3e-6, next logits 0.067 of 4.2 apart (a Zen 5). The
// mat-vecs themselves are held to 1e-5 of their magnitude by the kernel test ("CPU_REPACK
// buffers: ... results equal a plain buffer's").
TEST_CASE("model: CPU_REPACK weights give the logits of plain weights (CPU)", "[model][repack]") {
    backend_holder be;
    make_cpu_backend(be, 2);
    for (tsr_type wt : {TSR_TYPE_Q4_0, TSR_TYPE_Q8_0, TSR_TYPE_IQ4_NL, TSR_TYPE_Q5_1, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q2_K, TSR_TYPE_Q3_K}) {
        for (bool use_mmap : {true, false}) {
            DYNAMIC_SECTION(tsr_type_name(wt) << (use_mmap ? " mmap" : " read")) {
                tiny t;
                make_tiny(arch::llama, wt, false, t);
                std::string err;
                model plain, repacked;
                placement pl;
                pl.main = be.b;
                REQUIRE_OK(load_model(t.path.c_str(), pl, plain, nullptr, nullptr, err, false));
                pl.repack = true;
                REQUIRE_OK(load_model(t.path.c_str(), pl, repacked, nullptr, nullptr, err, use_mmap));
                const bool avx2 = tsr_cpu_isa_supported(TSR_CPU_ISA_AVX2);
                const bool interleaves = wt == TSR_TYPE_Q2_K || wt == TSR_TYPE_Q3_K ? avx2
                                         : wt == TSR_TYPE_Q5_K || wt == TSR_TYPE_Q5_1 ? avx2 && !tsr_cpu_isa_supported(TSR_CPU_ISA_AVX512)
                                                                                      : wt != TSR_TYPE_Q8_0;
                CHECK(repacked.mapped == use_mmap);
                CHECK((repacked.buf_w_repack != nullptr) == (use_mmap && interleaves));
                if (!use_mmap) CHECK(std::string(tsr_backend_buffer_name(repacked.buf_w)) == "CPU_REPACK");
                CHECK(tsr_backend_cpu_repacks(repacked.w.layers[0].ffn_down) == interleaves);
                CHECK(std::string(tsr_backend_buffer_name(repacked.w.layers[0].ffn_down->buffer)) == (interleaves || !use_mmap ? "CPU_REPACK" : "CPU"));
                // the prompt repeated past every_layout tokens: every type takes the CPU
                // backend's GEMM
                std::vector<int32_t> toks = plain.tok.encode(prompt_for(arch::llama), plain.tok.add_bos);
                const std::vector<int32_t> once = toks;
                REQUIRE(once.size() >= 2);
                while ((int64_t)toks.size() < gemm_test_columns::every_layout) toks.insert(toks.end(), once.begin() + 1, once.end());
                session_params sp = test_params(TSR_TYPE_F32, true);
                sp.n_ctx = sp.n_batch = 192;
                std::vector<float> logits[2], next[2];
                for (int i = 0; i < 2; ++i) {
                    session s;
                    REQUIRE_OK(session_init(s, i ? repacked : plain, be.b, sp, err));
                    REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
                    logits[i] = s.logits;
                    REQUIRE_OK(session_eval(s, toks.data() + 1, 1, err));
                    next[i] = s.logits;
                }
                CHECK(logits[0] == logits[1]);
                REQUIRE(next[0].size() == next[1].size());
                float big = 0.0f, diff = 0.0f;
                for (size_t k = 0; k < next[0].size(); ++k) {
                    big = std::max(big, std::fabs(next[0][k]));
                    diff = std::max(diff, std::fabs(next[0][k] - next[1][k]));
                }
                CHECK(big > 0.0f);
                INFO("next token's logits: largest difference " << diff << " of " << big);
                const bool same_order = !(wt == TSR_TYPE_Q3_K && tsr_cpu_get_isa() != TSR_CPU_ISA_AVX2);
                CHECK(diff <= (same_order ? 1e-4f : (float) tolerance(wt)) * big);
            }
        }
    }
}

// A file whose tensor data is not 32-byte aligned cannot be mapped: the loader says why and
// reads the weights instead, to the same logits.
TEST_CASE("model: a file that cannot be mapped is read, and the model says why", "[model][mmap]") {
    backend_holder be;
    make_cpu_backend(be, 1);
    tiny t;
    make_tiny(arch::qwen2, TSR_TYPE_F32, true, t);
    std::string err;
    const std::string path = t.path + ".misaligned.gguf";
    uint64_t data_offset = 0;
    for (size_t pad = 0; pad < 64 && data_offset % TSR_GGUF_MMAP_ALIGN == 0; ++pad) {
        REQUIRE_OK(trun_test::write_edited_model(t.path, path, [&](tsr_gguf_context * g) {
            return tsr_gguf_set_val_u32(g, "general.alignment", 8) && tsr_gguf_set_val_str(g, "test.pad", std::string(pad, 'x').c_str());
        }, err));
        tsr_gguf_context * g = tsr_gguf_init_from_file(path.c_str(), tsr_gguf_init_params{true, nullptr});
        REQUIRE(g);
        data_offset = tsr_gguf_get_data_offset(g);
        tsr_gguf_free(g);
    }
    REQUIRE(data_offset % TSR_GGUF_MMAP_ALIGN != 0);
    model m;
    REQUIRE_OK(load_model(path.c_str(), be.b, m, nullptr, nullptr, err, true));
    CHECK_FALSE(m.mapped);
    INFO(m.not_mapped_why);
    CHECK(m.not_mapped_why.find("not a multiple of 32") != std::string::npos);
    const std::vector<int32_t> toks = m.tok.encode(prompt_for(arch::qwen2), m.tok.add_bos);
    session s;
    REQUIRE_OK(session_init(s, m, be.b, test_params(TSR_TYPE_F32, true), err));
    REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
    CHECK(rel_err(s.logits, ref_forward(t.ref, toks), (size_t) m.hp.n_vocab) < tolerance(TSR_TYPE_F32));
    remove(path.c_str());
}

TEST_CASE("model: tiny models in every GGUF quantization and a Q4_K_M mix equal the reference (CPU)", "[model][quant]") {
    backend_holder be;
    std::string err;
    be.b = make_backend("cpu", 0, 2, err);
    REQUIRE_OK(be.b);
    const tsr_type types[] = {TSR_TYPE_Q4_1, TSR_TYPE_Q5_0, TSR_TYPE_Q5_1, TSR_TYPE_IQ4_NL, TSR_TYPE_Q2_K,
                              TSR_TYPE_Q3_K, TSR_TYPE_Q4_K, TSR_TYPE_Q5_K, TSR_TYPE_Q6_K};
    for (arch a : {arch::gpt2, arch::llama}) {
        for (tsr_type wt : types)
            DYNAMIC_SECTION(arch_name(a) << " " << tsr_type_name(wt)) {
                check_against_reference(be.b, a, wt, true, TSR_TYPE_F32, tolerance(wt));
            }
        DYNAMIC_SECTION(arch_name(a) << " Q4_K_M mix") {
            check_against_reference(be.b, a, q4_k_m_types(), true, TSR_TYPE_F32, tolerance(TSR_TYPE_Q4_K));
        }
    }
}

TEST_CASE("model: a Q4_K_M mix puts Q6_K where llama.cpp does", "[model][quant]") {
    std::string err;
    backend_holder be;
    be.b = make_backend("cpu", 0, 1, err);
    REQUIRE_OK(be.b);
    // GPT-2 (tied output): token_embd.weight is the output matrix, and attn_qkv counts as attn_v
    for (arch a : {arch::llama, arch::gpt2}) {
        const bool gpt2 = a == arch::gpt2;
        tiny t;
        make_tiny(a, q4_k_m_types(), t);
        model m;
        REQUIRE_OK(load_model(t.path.c_str(), be.b, m, nullptr, nullptr, err));
        CHECK((m.w.output == m.w.tok_embd) == gpt2);
        CHECK(m.w.output->type == TSR_TYPE_Q6_K);
        CHECK(m.w.tok_embd->type == (gpt2 ? TSR_TYPE_Q6_K : TSR_TYPE_Q4_K));
        // 2 layers: layer 1 is in the last eighth (7 * 2 / 8 == 1), layer 0 in no rule's range
        for (size_t il = 0; il < m.w.layers.size(); ++il) {
            const layer_weights & L = m.w.layers[il];
            const tsr_type more = il == 1 ? TSR_TYPE_Q6_K : TSR_TYPE_Q4_K;
            CHECK((gpt2 ? L.wo : L.wq)->type == TSR_TYPE_Q4_K);
            CHECK((gpt2 ? L.wqkv : L.wv)->type == more);
            CHECK(L.ffn_down->type == more);
            CHECK(L.ffn_up->type == TSR_TYPE_Q4_K);
        }
    }
    // llama.cpp's use_more_bits on 32 layers: 0-3, 28-31 and every third from 6
    int n_more = 0;
    for (int il = 0; il < 32; ++il) n_more += weight_types::more_bits_layer(il, 32);
    CHECK(n_more == 16);
    CHECK(weight_types::more_bits_layer(6, 32));
    CHECK_FALSE(weight_types::more_bits_layer(5, 32));
}

TEST_CASE("model: incremental decoding with the KV cache equals a full re-run", "[model]") {
    backend_holder be;
    std::string err;
    be.b = make_backend("cpu", 0, 2, err);
    REQUIRE_OK(be.b);
    for (arch a : {arch::gpt2, arch::llama}) {
        for (int variant = 0; variant < 4; ++variant) {
            const bool flash = variant % 2 == 0;
            const tsr_type kv_type = variant < 2 ? TSR_TYPE_F32 : TSR_TYPE_F16;
            // F16 K/V: a single-token product may round Q to F16 where a batched one does not
            const double tol = kv_type == TSR_TYPE_F32 ? 2e-5 : 2e-3;
            DYNAMIC_SECTION(arch_name(a) << (flash ? " flash_attn" : " mul_mat+soft_max") << " kv " << tsr_type_name(kv_type)) {
                tiny t;
                make_tiny(a, TSR_TYPE_F32, t);
                model m;
                REQUIRE_OK(load_model(t.path.c_str(), be.b, m, nullptr, nullptr, err));
                std::vector<int32_t> toks = m.tok.encode(std::string(prompt_for(a)) + " the lazy dog and the sea", m.tok.add_bos);
                REQUIRE(toks.size() >= 8);
                const size_t V = (size_t) m.hp.n_vocab, T = toks.size();

                session_params sp = test_params(kv_type, flash);
                session full;
                REQUIRE_OK(session_init(full, m, be.b, sp, err));
                REQUIRE_OK(session_eval(full, toks.data(), (int) T, err));

                // one token at a time
                session inc;
                REQUIRE_OK(session_init(inc, m, be.b, sp, err));
                const size_t reserved = tsr_backend_sched_get_buffer_size(inc.sched, be.b);
                std::vector<float> step((size_t) T * V);
                for (size_t i = 0; i < T; ++i) {
                    REQUIRE_OK(session_eval(inc, &toks[i], 1, err));
                    std::copy(inc.logits.begin(), inc.logits.end(), step.begin() + (long) (i * V));
                }
                // the compute buffer reserved for the worst case never grew
                CHECK(tsr_backend_sched_get_buffer_size(inc.sched, be.b) == reserved);
                // prompt in batches of 3, then the rest one by one
                session mixed;
                sp.n_batch = 3;
                REQUIRE_OK(session_init(mixed, m, be.b, sp, err));
                REQUIRE_OK(session_eval(mixed, toks.data(), (int) T - 2, err));
                std::vector<float> mix(mixed.logits);
                for (size_t i = T - 2; i < T; ++i) {
                    REQUIRE_OK(session_eval(mixed, &toks[i], 1, err));
                    mix.insert(mix.end(), mixed.logits.begin(), mixed.logits.end());
                }
                double num = 0, den = 0, num2 = 0;
                for (size_t i = 0; i < T * V; ++i) {
                    num = std::max(num, (double) std::fabs(step[i] - full.logits[i]));
                    num2 = std::max(num2, (double) std::fabs(mix[i] - full.logits[i]));
                    den = std::max(den, (double) std::fabs(full.logits[i]));
                }
                INFO("incremental vs full: " << num / den << ", batched-by-3 vs full: " << num2 / den);
                CHECK(num / den < tol);
                CHECK(num2 / den < tol);
                // and the context limit is an error, not an overrun
                session small;
                sp.n_ctx = 32;
                REQUIRE_OK(session_init(small, m, be.b, sp, err));
                std::vector<int32_t> many(40, toks[0]);
                CHECK_FALSE(session_eval(small, many.data(), (int) many.size(), err));
                CHECK(err.find("context full") != std::string::npos);
            }
        }
    }
}

#if defined(TSR_HAVE_VULKAN) || defined(TSR_HAVE_CUDA)
namespace {
// Devices of a backend kind in the registry (0 when it is not built in).
size_t devices_of_kind(const char * kind) { return tsr_backend_reg_dev_count(tsr_backend_reg_by_name(kind)); }

// The CPU comparisons again on a GPU backend (its kernels may round differently: looser).
void check_gpu_backend(const char * name, int device) {
    backend_holder be;
    std::string err;
    be.b = make_backend(name, device, 0, err);
    REQUIRE_OK(be.b != nullptr);
    for (arch a : {arch::gpt2, arch::llama}) {
        for (tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0}) {
            DYNAMIC_SECTION(name << " " << arch_name(a) << " " << tsr_type_name(wt)) {
                // F32 weights: a GPU may use reduced-precision (TF32/F16) products
                check_against_reference(be.b, a, wt, true, TSR_TYPE_F32, wt == TSR_TYPE_F32 ? 2e-3 : 2 * tolerance(wt));
            }
        }
        // the file type people download most: Q4_K with Q6_K for output.weight and some
        // attn_v / ffn_down (get_rows of Q4_K embeddings, mat-vec and GEMM of both types)
        DYNAMIC_SECTION(name << " " << arch_name(a) << " Q4_K_M mix") {
            check_against_reference(be.b, a, q4_k_m_types(), true, TSR_TYPE_F32, 2 * tolerance(TSR_TYPE_Q4_K));
        }
        DYNAMIC_SECTION(name << " " << arch_name(a) << " mul_mat + soft_max_ext attention, F16 KV") {
            check_against_reference(be.b, a, TSR_TYPE_F32, false, TSR_TYPE_F16, 1e-2);
        }
    }
}
} // namespace
#endif

TEST_CASE("model: tiny models on Vulkan equal the reference", "[model][vulkan]") {
#ifdef TSR_HAVE_VULKAN
    if (devices_of_kind("vulkan") == 0) {
        WARN("skipped: no Vulkan device");
        return;
    }
    check_gpu_backend("vulkan", -1);
#else
    WARN("skipped: built without the Vulkan backend (TSR_HAVE_VULKAN)");
#endif
}

#ifdef TSR_HAVE_VULKAN
namespace {
struct greedy_result {
    std::vector<int32_t> tokens;   // generated
    std::vector<float> logits;     // the prompt's, every position
    int n_splits = 0, n_split_inputs = 0;   // of the last (one-token) graph
    std::vector<tsr_backend_sched_buffer_info> compute;
};

// Load the model as pl says, evaluate the prompt, then generate n_gen tokens greedily.
greedy_result run_greedy(const std::string & path, const placement & pl, arch a, int n_gen, int n_batch) {
    model m;
    std::string err;
    REQUIRE_OK(load_model(path.c_str(), pl, m, nullptr, nullptr, err));
    const std::vector<int32_t> toks = m.tok.encode(prompt_for(a), m.tok.add_bos);
    session s;
    session_params sp = test_params(TSR_TYPE_F16, true);
    sp.n_batch = n_batch;
    REQUIRE_OK(session_init(s, m, pl.main, sp, err));
    greedy_result r;
    r.compute = s.compute;
    REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
    r.logits = s.logits;
    const size_t V = (size_t) m.hp.n_vocab;
    for (int i = 0; i < n_gen; ++i) {
        const float * last = s.logits.data() + s.logits.size() - V;
        const int32_t id = (int32_t) (std::max_element(last, last + V) - last);
        r.tokens.push_back(id);
        REQUIRE_OK(session_eval(s, &id, 1, err));
    }
    r.n_splits = s.n_splits;
    r.n_split_inputs = s.n_split_inputs;
    return r;
}

// Vulkan's default device; false, with a warning, when there is no Vulkan device.
bool open_vulkan(backend_holder & vk) {
    if (devices_of_kind("vulkan") == 0) {
        WARN("skipped: no Vulkan device");
        return false;
    }
    std::string err;
    vk.b = make_backend("vulkan", -1, 0, err);
    REQUIRE_OK(vk.b);
    return true;
}

// The CPU backend (2 threads) and Vulkan's default device; false, with a warning, when there
// is no Vulkan device.
bool open_cpu_and_vulkan(backend_holder & cpu, backend_holder & vk) {
    if (!open_vulkan(vk)) return false;
    std::string err;
    cpu.b = make_backend("cpu", 0, 2, err);
    REQUIRE_OK(cpu.b);
    return true;
}
} // namespace
#endif

// -ngl: every split between Vulkan and the CPU, from no layer to every layer on the GPU,
// generates the CPU's tokens; each backend's compute buffer is planned at its lower bound.
TEST_CASE("model: partial offload at every -ngl on Vulkan gives the CPU's greedy tokens", "[model][vulkan][sched]") {
#ifdef TSR_HAVE_VULKAN
    backend_holder cpu, vk;
    if (!open_cpu_and_vulkan(cpu, vk)) return;
    for (arch a : {arch::gpt2, arch::llama}) {
        tiny t;
        make_tiny(a, TSR_TYPE_F16, t);
        placement on_cpu;
        on_cpu.main = cpu.b;
        const greedy_result want = run_greedy(t.path, on_cpu, a, 6, 64);
        const int n_layer = tiny_hparams(a).n_layer;
        // batches of 64: the worst-case graph offloads the CPU layers' products to Vulkan
        // (tsr_backend_offload_op), copying their weights; of 16: it does not
        for (int ngl = 0; ngl <= n_layer; ++ngl) for (int n_batch : {16, 64}) {
            DYNAMIC_SECTION(arch_name(a) << " -ngl " << ngl << " batch " << n_batch) {
                placement pl;
                pl.main = vk.b;
                pl.cpu = cpu.b;
                pl.n_gpu_layers = ngl;
                const greedy_result got = run_greedy(t.path, pl, a, 6, n_batch);
                CHECK(got.tokens == want.tokens);
                CHECK(tsrt::nmse(got.logits, want.logits) < 1e-5);
                // nothing on the GPU: one split, nothing copied; otherwise the graph is cut
                if (ngl == 0) CHECK((got.n_splits == 1 && got.n_split_inputs == 0));
                else CHECK((got.n_splits >= 2 && got.n_split_inputs >= 1));
                REQUIRE(got.compute.size() == 2);
                // at the lower bound, weight copies (batch 64) included
                for (const tsr_backend_sched_buffer_info & c : got.compute) {
                    INFO("planned " << c.planned_size << ", lower bound " << c.lower_bound << ", " << c.n_inputs << " input copies");
                    CHECK(c.planned_size <= c.lower_bound);
                }
            }
        }
    }
#else
    WARN("skipped: built without the Vulkan backend (TSR_HAVE_VULKAN)");
#endif
}

// Vulkan runs mul_mat_id on F32 experts: the whole mixture of experts, router and experts,
// lives in Vulkan's buffers and matches the float64 reference (experts in a type Vulkan's
// mul_mat_id lacks would stay in host memory, as the BF16 test below shows for mul_mat).
TEST_CASE("model: a mixture of experts runs on Vulkan, experts included", "[model][vulkan][moe]") {
#ifdef TSR_HAVE_VULKAN
    backend_holder be;
    if (!open_vulkan(be)) return;
    std::string err;
    const hparams hp = tiny_moe_hparams(arch::llama);
    check_against_reference(be.b, hp, TSR_TYPE_F32, false, true, TSR_TYPE_F32, 2 * tolerance(TSR_TYPE_F32));
    tiny t;
    make_tiny(hp, TSR_TYPE_F32, false, t);
    model m;
    REQUIRE_OK(load_model(t.path.c_str(), be.b, m, nullptr, nullptr, err));
    const layer_weights & L = m.w.layers[0];
    CHECK_FALSE(tsr_backend_buffer_is_host(L.ffn_up_exps->buffer));
    CHECK_FALSE(tsr_backend_buffer_is_host(L.ffn_down_exps->buffer));
    CHECK_FALSE(tsr_backend_buffer_is_host(L.ffn_gate_inp->buffer));
    CHECK_FALSE(tsr_backend_buffer_is_host(L.wq->buffer));
#else
    WARN("skipped: built without the Vulkan backend (TSR_HAVE_VULKAN)");
#endif
}

// A file in a type Vulkan lacks (BF16) runs: those weights stay in host memory and their ops
// run on the CPU, the rest on Vulkan; a K-quant file runs on Vulkan itself.
TEST_CASE("model: BF16 and K-quant files run on Vulkan with what it lacks on the CPU", "[model][vulkan][quant]") {
#ifdef TSR_HAVE_VULKAN
    backend_holder be;
    if (!open_vulkan(be)) return;
    std::string err;
    for (tsr_type wt : {TSR_TYPE_BF16, TSR_TYPE_Q4_K}) {
        DYNAMIC_SECTION(tsr_type_name(wt)) {
            check_against_reference(be.b, arch::llama, wt, true, TSR_TYPE_F32, 2 * tolerance(wt));
            tiny t;
            make_tiny(arch::llama, wt, t);
            model m;
            REQUIRE_OK(load_model(t.path.c_str(), be.b, m, nullptr, nullptr, err));
            CHECK(tsr_backend_buffer_is_host(m.w.tok_embd->buffer));        // the input layer: always the CPU
            // Vulkan has no BF16 kernels (its quantized types, K-quants included, it runs)
            CHECK(tsr_backend_buffer_is_host(m.w.layers[0].wq->buffer) == (wt == TSR_TYPE_BF16));
            CHECK_FALSE(tsr_backend_buffer_is_host(m.w.layers[0].attn_norm->buffer));   // F32 norms: Vulkan
        }
    }
#else
    WARN("skipped: built without the Vulkan backend (TSR_HAVE_VULKAN)");
#endif
}

// Decoding a Q4_K_M mix on Vulkan (its dequantize-on-the-fly mat-vec) picks the CPU's tokens
// (its logits against the reference: check_gpu_backend).
TEST_CASE("model: greedy tokens of a Q4_K_M mix on Vulkan equal the CPU's", "[model][vulkan][quant]") {
#ifdef TSR_HAVE_VULKAN
    backend_holder cpu, vk;
    if (!open_cpu_and_vulkan(cpu, vk)) return;
    for (arch a : {arch::gpt2, arch::llama}) {
        DYNAMIC_SECTION(arch_name(a)) {
            tiny t;
            make_tiny(a, q4_k_m_types(), t);
            placement on_cpu, on_vk;
            on_cpu.main = cpu.b;
            on_vk.main = vk.b;
            on_vk.cpu = cpu.b;
            CHECK(run_greedy(t.path, on_vk, a, 8, 16).tokens == run_greedy(t.path, on_cpu, a, 8, 16).tokens);
        }
    }
#else
    WARN("skipped: built without the Vulkan backend (TSR_HAVE_VULKAN)");
#endif
}

TEST_CASE("model: tiny models on CUDA equal the reference", "[model][cuda]") {
#ifdef TSR_HAVE_CUDA
    if (devices_of_kind("cuda") == 0) {
        WARN("skipped: no CUDA device");
        return;
    }
    check_gpu_backend("cuda", 0);
#else
    WARN("skipped: built without the CUDA backend (TSR_HAVE_CUDA)");
#endif
}

TEST_CASE("model: loader errors name the problem", "[model]") {
    backend_holder be;
    std::string err;
    be.b = make_backend("cpu", 0, 1, err);
    REQUIRE_OK(be.b);
    model m;
    CHECK_FALSE(load_model("/nonexistent/model.gguf", be.b, m, nullptr, nullptr, err));
    CHECK(err.find("cannot open") != std::string::npos);
    // a valid GGUF that lacks a tensor
    tiny t;
    make_tiny(arch::llama, TSR_TYPE_F32, t);
    tsr_gguf_init_params ip = {false, nullptr};
    tsr_context * ctx = nullptr;
    ip.ctx = &ctx;
    tsr_gguf_context * g = tsr_gguf_init_from_file(t.path.c_str(), ip);
    REQUIRE(g);
    tsr_gguf_context * w = tsr_gguf_init_empty();
    REQUIRE(tsr_gguf_set_kv(w, g));
    for (tsr_tensor * x = tsr_get_first_tensor(ctx); x; x = tsr_get_next_tensor(ctx, x)) {
        if (strcmp(x->name, "blk.1.ffn_up.weight") != 0) REQUIRE(tsr_gguf_add_tensor(w, x));
    }
    const std::string p2 = t.path + ".missing.gguf";
    REQUIRE(tsr_gguf_write_to_file(w, p2.c_str(), false));
    CHECK_FALSE(load_model(p2.c_str(), be.b, m, nullptr, nullptr, err));
    CHECK(err.find("blk.1.ffn_up.weight") != std::string::npos);
    remove(p2.c_str());
    tsr_gguf_free(w);
    tsr_gguf_free(g);
    tsr_free(ctx);
}

// Regression (issue 15, item 3): block_count 2^31-1 threw std::bad_alloc out of the loader,
// 20,000,000 allocated 2.5 GB before failing, a u64 of 2^32+1 was read as 1 layer and ran.
// Every count is now range-checked at full width and cross-checked against the tensors.
TEST_CASE("model: hostile metadata is refused, naming the key, its value and the range or tensor", "[model][hostile]") {
    backend_holder be;
    std::string err;
    be.b = make_backend("cpu", 0, 1, err);
    REQUIRE_OK(be.b);
    for (arch a : {arch::gpt2, arch::llama, arch::qwen2, arch::qwen3, arch::qwen3moe}) {
        tiny t;
        make_tiny(a, TSR_TYPE_F32, t);
        for (const trun_test::hostile_case & hc : trun_test::hostile_cases(t.ref.hp)) {
            const std::string path = t.path + "." + hc.name + ".gguf";
            REQUIRE_OK(trun_test::write_edited_model(t.path, path, hc.edit, err));
            model m;
            bool loaded = true;
            err.clear();
            try {
                loaded = load_model(path.c_str(), be.b, m, nullptr, nullptr, err);
            } catch (const std::exception & e) {
                err = std::string("exception: ") + e.what();
            }
            INFO(arch_name(a) << ", " << hc.name << ": " << err);
            CHECK_FALSE(loaded);
            CHECK(err.find(hc.error) != std::string::npos);
            remove(path.c_str());
        }
    }
}

// ---- files quantized by llama.cpp itself (hidden: run by scripts/llamacpp-quant-check.sh) ----
// The other quantization tests read files tessera wrote. These read files that llama.cpp's own
// quantizer (llama_model_quantize, what llama-quantize runs) made from F32 models written
// here: its choice of types per tensor (Q6_K for some, F32 norms, Q5_0 / Q8_0 where a row is
// not whole super-blocks), its block contents and its metadata. Hidden (the "[.]" tag): llama.cpp
// is a reference, never a test dependency, so CI cannot make these files; the script installs
// node-llama-cpp's prebuilt libraries, writes the sources ("[llamacpp-sources]"), quantizes them
// in every ftype and runs "[llamacpp-files]" on the results.

// One of the source models below: hyperparameters and vocabulary (seed 777 for the weights:
// the same values for every type). Qwen3-MoE uses all 4 of its experts: with 2 of 4, every
// random router tried (64 seeds) had a 2nd and 3rd expert within 1.4e-2 of each other for
// some token, closer than the quantized types' errors, so a rounding could route another way
// and the logits would say nothing; with all used, mul_mat_id runs every expert of
// llama.cpp's 3D tensors, weighted by the router's probabilities.
struct llamacpp_source {
    hparams hp;
    tokenizer tok;
    std::vector<std::string> merges;
    llamacpp_source(arch a, int n_embd) : hp(trun_test::small_hparams(a, n_embd)) {
        if (n_embd == 256) hp.n_ff = 512;
        if (hp.is_moe()) hp.n_expert_used = hp.n_expert;
        if (a != arch::llama) build_builtin_gpt2_vocab(60, tok, merges);
        else build_builtin_spm_vocab(80, tok);
        hp.n_vocab = tok.n_vocab();
    }
    bool write(const std::string & path, const weight_types & wt, std::string & err) const {
        return write_random_model(path.c_str(), hp, tok, merges, wt, default_tied(hp.a), 777, err);
    }
    // The weights' headers in types wt, as write() would create them (no data), in a new
    // no_alloc context: nullptr on failure (err says why).
    tsr_context * headers(const weight_types & wt, std::string & err) const {
        weights w;
        return new_weight_headers(hp, wt, default_tied(hp.a), w, err);
    }
};

const arch k_llamacpp_archs[] = {arch::gpt2, arch::llama, arch::qwen2, arch::qwen3, arch::qwen3moe};

// The F32 source models, in $TSR_LLAMACPP_DIR: GPT-2, LLaMA, Qwen2, Qwen3 and Qwen3-MoE of 2 layers,
// 256 wide (rows of whole K-quant super-blocks) and 64 wide (none: llama.cpp's fallback types).
TEST_CASE("model: the F32 models llama.cpp's quantizer reads (writes them)", "[.][llamacpp-sources]") {
    const char * dir = getenv("TSR_LLAMACPP_DIR");
    REQUIRE(dir);
    for (arch a : k_llamacpp_archs) {
        for (int n_embd : {256, 64}) {
            const std::string path = std::string(dir) + "/src-" + arch_name(a) + "-" + std::to_string(n_embd) + ".gguf";
            std::string err;
            REQUIRE_OK(llamacpp_source(a, n_embd).write(path, TSR_TYPE_F32, err));
        }
    }
}

// Every quantized file in $TSR_LLAMACPP_DIR (q-<ftype>-<source>.gguf): tessera's dequantization
// of each tensor equals ggml's bit for bit (with $TSR_LLAMACPP_LIBDIR), and the runner's logits
// and greedy picks equal the float64 reference on the file's weights (decoded by tests/support),
// from plain CPU buffers, from CPU_REPACK (tessera-run's default), on Vulkan's default device
// (a build with it and a device: lavapipe where there is no GPU) and on CUDA device 0 (a build
// with it and a device: tests/device/gpu-check.sh carries a subset of the files there).
TEST_CASE("model: files quantized by llama.cpp equal the reference", "[.][llamacpp-files]") {
    const char * dir = getenv("TSR_LLAMACPP_DIR");
    REQUIRE(dir);
    std::vector<std::string> files;
    if (DIR * d = opendir(dir)) {
        while (dirent * e = readdir(d)) {
            const std::string n = e->d_name;
            if (n.rfind("q-", 0) == 0 && n.size() > 5 && n.substr(n.size() - 5) == ".gguf") files.push_back(std::string(dir) + "/" + n);
        }
        closedir(d);
    }
    std::sort(files.begin(), files.end());
    REQUIRE(!files.empty());
    const bool with_ggml = getenv("TSR_LLAMACPP_LIBDIR") != nullptr;
    using ggml_dequantize_fn = void (*)(const void * x, float * y, int64_t k);
    backend_holder be, vk, cu;
    make_cpu_backend(be, 2);
#ifdef TSR_HAVE_VULKAN
    open_vulkan(vk);
#endif
#ifdef TSR_HAVE_CUDA
    if (devices_of_kind("cuda") > 0) {
        std::string err;
        cu.b = make_backend("cuda", 0, 0, err);
        REQUIRE_OK(cu.b);
    }
#endif
    for (const std::string & path : files) {
        DYNAMIC_SECTION(path) {
            // the source it was made from, by name (q-<ftype>-src-<arch>-<width>.gguf): the
            // reference takes its hyperparameters and tokens from there, not from the loader
            const size_t at = path.find("-src-"), dash = path.rfind('-');
            REQUIRE((at != std::string::npos && dash > at));
            const std::string arch_str = path.substr(at + 5, dash - at - 5);
            const arch * a = std::find_if(std::begin(k_llamacpp_archs), std::end(k_llamacpp_archs),
                                          [&](arch x) { return arch_str == arch_name(x); });
            REQUIRE(a != std::end(k_llamacpp_archs));
            const llamacpp_source src(*a, std::atoi(path.c_str() + dash + 1));
            const std::vector<int32_t> toks = src.tok.encode(prompt_for(*a), src.tok.add_bos);
            REQUIRE(toks.size() >= 5);
            tsr_context * wctx = nullptr;
            tsr_gguf_context * g = tsr_gguf_init_from_file(path.c_str(), tsr_gguf_init_params{false, &wctx});
            INFO(tsr_last_error());
            REQUIRE(g);
            tsr_gguf_free(g);
            ref_model ref;
            ref.hp = src.hp;
            std::map<std::string, int> type_count;
            tsr_type loosest = TSR_TYPE_F32;
            int n_bitwise = 0;  // tensors whose dequantization was compared with ggml's
            for (tsr_tensor * t = tsr_get_first_tensor(wctx); t; t = tsr_get_next_tensor(wctx, t)) {
                ref.w[t->name] = dequant(t);
                ++type_count[tsr_type_name(t->type)];
                if (tolerance(t->type) > tolerance(loosest)) loosest = t->type;
                if (t->type == TSR_TYPE_F32 || !with_ggml) continue;
                const std::string fn = t->type == TSR_TYPE_F16    ? "ggml_fp16_to_fp32_row"
                                       : t->type == TSR_TYPE_BF16 ? "ggml_bf16_to_fp32_row"
                                                                  : std::string("dequantize_row_") + tsr_type_name(t->type);
                const char * why = "";
                const auto ggml = (ggml_dequantize_fn) tsrt::ggml_base_symbol(fn.c_str(), &why);
                INFO(t->name << " " << tsr_type_name(t->type) << ": " << fn << " " << why);
                REQUIRE(ggml);
                const int64_t n = tsr_nelements(t);
                std::vector<float> ours((size_t) n), theirs((size_t) n);
                REQUIRE(tsr_to_float_row(t->type, t->data, ours.data(), n));
                ggml(t->data, theirs.data(), n);
                CHECK(memcmp(ours.data(), theirs.data(), sizeof(float) * (size_t) n) == 0);
                ++n_bitwise;
            }
            tsr_free(wctx);
            std::string types;
            for (const auto & tc : type_count) types += " " + tc.first + " x" + std::to_string(tc.second);
            // the reference forward, once a file: it depends on the weights and tokens alone
            ref.min_route_margin = 1.0;
            const std::vector<vec> want = ref_forward(ref, toks);
            for (const char * where : {"CPU", "CPU_REPACK", "Vulkan", "CUDA"}) {
                const bool gpu = !strcmp(where, "Vulkan") || !strcmp(where, "CUDA");
                placement pl;
                pl.main = !strcmp(where, "Vulkan") ? vk.b : !strcmp(where, "CUDA") ? cu.b : be.b;
                if (!pl.main) continue;  // no such device (or backend) here
                pl.cpu = be.b;
                pl.repack = !strcmp(where, "CPU_REPACK");
                // a GPU backend's kernels may round differently: twice the CPU's tolerance
                const double tol = (gpu ? 2 : 1) * tolerance(loosest);
                model m;
                std::string err;
                REQUIRE_OK(load_model(path.c_str(), pl, m, nullptr, nullptr, err, true));
                CHECK(m.tok.encode(prompt_for(*a), m.tok.add_bos) == toks);
                CHECK(m.hp.n_vocab == src.hp.n_vocab);
                CHECK(m.hp.n_head_kv == src.hp.n_head_kv);
                CHECK(m.hp.head_dim() == src.hp.head_dim());
                CHECK(m.hp.n_expert_used == src.hp.n_expert_used);
                // routing no closer than the errors allowed (a rounding could pick another
                // expert, and the logits would say nothing): no choice with every expert used
                INFO("closest routing margin " << ref.min_route_margin);
                REQUIRE(ref.min_route_margin > tol);
                session s;
                REQUIRE_OK(session_init(s, m, pl.main, test_params(TSR_TYPE_F32, true), err));
                REQUIRE_OK(session_eval(s, toks.data(), (int) toks.size(), err));
                const double e = rel_err(s.logits, want, (size_t) m.hp.n_vocab);
                INFO("tensor types:" << types << ", " << where << ": relative max error " << e);
                CHECK(e < tol);
                check_greedy(s.logits, want, (size_t) m.hp.n_vocab, tol);
                printf("%-30s %-10s rel. error %.2e, %2d tensors as ggml's bit for bit; types:%s\n", path.substr(path.rfind('/') + 1).c_str(),
                       where, e, n_bitwise, types.c_str());
            }
        }
    }
}

// run_bench's and the tests' Q4_K_M and Q5_K_M mixes (q4_k_m_types, q5_k_m_types: Q6_K for the
// output and for attn_v / attn_qkv / ffn_down where llama.cpp's use_more_bits says) give every
// tensor the type llama.cpp's quantizer gave it in $TSR_LLAMACPP_DIR's files of the 256-wide sources.
TEST_CASE("model: the Q4_K_M / Q5_K_M mixes type each tensor as llama.cpp's quantizer does", "[.][llamacpp-files]") {
    const char * dir = getenv("TSR_LLAMACPP_DIR");
    REQUIRE(dir);
    const std::pair<const char *, weight_types> mixes[] = {{"Q4_K_M", q4_k_m_types()}, {"Q5_K_M", q5_k_m_types()}};
    for (arch a : {arch::gpt2, arch::llama}) {
        for (const auto & mix : mixes) {
            DYNAMIC_SECTION(arch_name(a) << " " << mix.first) {
                const std::string theirs_path = std::string(dir) + "/q-" + mix.first + "-src-" + arch_name(a) + "-256.gguf";
                std::string err;
                tsr_context * ours = llamacpp_source(a, 256).headers(mix.second, err), * theirs = nullptr;
                REQUIRE_OK(ours);
                tsr_gguf_context * g = tsr_gguf_init_from_file(theirs_path.c_str(), tsr_gguf_init_params{true, &theirs});
                INFO(theirs_path << ": " << tsr_last_error());
                REQUIRE(g);
                tsr_gguf_free(g);
                int n = 0;
                for (tsr_tensor * t = tsr_get_first_tensor(theirs); t; t = tsr_get_next_tensor(theirs, t), ++n) {
                    const tsr_tensor * o = tsr_get_tensor(ours, t->name);
                    INFO(t->name << ": llama.cpp " << tsr_type_name(t->type) << ", tessera " << (o ? tsr_type_name(o->type) : "(none)"));
                    REQUIRE(o);
                    CHECK(o->type == t->type);
                }
                CHECK(n > 0);
                tsr_free(ours);
                tsr_free(theirs);
            }
        }
    }
}
