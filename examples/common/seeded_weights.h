// seeded_weights.h - the weights of an example model generated from a seed instead of read
// from a file: metadata in a no_alloc context, data in one WEIGHTS buffer of a backend, and
// each parameter's values kept on the host so a test can run a reference on the same numbers.
// Shared by examples/whisper-encoder and examples/unet-block.
#pragma once

#include "tessera/tessera.h"
#include "tessera/backend.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace exw {

// A deterministic generator (splitmix64): the same weights from a seed on every platform.
struct rng {
    uint64_t s;
    explicit rng(uint64_t seed) : s(seed) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * (float) ((double) (next() >> 11) * 0x1.0p-53); }
};

// How a generated parameter is filled: uniform in [center - spread, center + spread].
struct fill { float center, spread; };

// A matrix of fan-in n keeps activations O(1) with spread sqrt(3 / n) (unit variance in, out).
inline fill fan_in(int n) { return {0.0f, std::sqrt(3.0f / (float) n)}; }
constexpr fill k_gain = {1.0f, 0.1f};    // normalization weights: near identity
constexpr fill k_bias = {0.0f, 0.05f};

// One weight: its tensor (in the weights buffer) and the values it was given.
struct param {
    tsr_tensor * t = nullptr;
    fill init = k_bias;
    std::vector<float> host;   // ne[0] innermost, exactly the values uploaded (f16-rounded for F16);
                               // set before generate_and_upload for a table that is not random
};

class weight_set {
public:
    // Room for n parameters' metadata.
    bool reserve(size_t n, std::string & err) {
        ctx_ = tsr::context(n * tsr_tensor_overhead(), nullptr, true);
        if (!ctx_.ok()) err = std::string("weights context: ") + tsr_last_error();
        return ctx_.ok();
    }

    // A parameter of shape ne (1 to 4 dims), generated as init says.
    bool add(param & p, const std::string & name, tsr_type type, std::vector<int64_t> ne, fill init, std::string & err) {
        ne.resize(4, 1);
        p.t = tsr_new_tensor_4d(ctx_, type, ne[0], ne[1], ne[2], ne[3]);
        if (!p.t) { err = "creating " + name + ": " + tsr_last_error(); return false; }
        tsr_set_name(p.t, name.c_str());
        p.init = init;
        params_.push_back(&p);
        return true;
    }

    // Every parameter into one WEIGHTS buffer of backend, its values generated from seed
    // (in creation order) unless set already, then uploaded.
    bool generate_and_upload(tsr_backend_t backend, uint64_t seed, std::string & err) {
        buf_ = tsr::backend_buffer(tsr_backend_alloc_ctx_tensors(ctx_, backend));
        if (!buf_.get()) { err = std::string("allocating the weights: ") + tsr_last_error(); return false; }
        rng r(seed);
        for (param * p : params_) {
            if (p->host.empty()) generate(*p, r);
            if (!upload(*p, err)) return false;
        }
        return true;
    }

    size_t bytes() const { return buf_.get() ? tsr_backend_buffer_get_size(buf_) : 0; }

private:
    // F16 tensors get f16-rounded values, so the host copy is exactly what the backend holds.
    static void generate(param & p, rng & r) {
        p.host.resize((size_t) tsr_nelements(p.t));
        for (float & v : p.host) {
            v = r.uniform(p.init.center - p.init.spread, p.init.center + p.init.spread);
            if (p.t->type == TSR_TYPE_F16) v = tsr_fp16_to_fp32(tsr_fp32_to_fp16(v));
        }
    }
    static bool upload(param & p, std::string & err) {
        bool ok = p.host.size() == (size_t) tsr_nelements(p.t);
        if (ok && p.t->type == TSR_TYPE_F16) {
            std::vector<tsr_fp16_t> h(p.host.size());
            tsr_fp32_to_fp16_row(p.host.data(), h.data(), (int64_t) h.size());
            ok = tsr_backend_tensor_set(p.t, h.data(), 0, h.size() * sizeof(tsr_fp16_t));
        } else if (ok) {
            ok = tsr_backend_tensor_set(p.t, p.host.data(), 0, p.host.size() * sizeof(float));
        }
        if (!ok) err = std::string("uploading ") + p.t->name + ": " + tsr_last_error();
        return ok;
    }

    tsr::context ctx_{0, nullptr, true};
    tsr::backend_buffer buf_;
    std::vector<param *> params_;   // creation order: the order values are drawn in
};

} // namespace exw
