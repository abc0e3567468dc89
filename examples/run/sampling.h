// sampling.h - next-token sampling: greedy (temp <= 0), or temperature + top-k + top-p
// with a seeded PRNG (splitmix64, so a seed gives the same text on every platform).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace trun {

struct rng {
    uint64_t s;
    explicit rng(uint64_t seed = 0x853c49e6748fea9bull) : s(seed) {}
    uint64_t next() {  // splitmix64
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return (double) (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
    float symmetric() { return (float) (2.0 * uniform() - 1.0); }                     // [-1, 1)
};

struct sampler_params {
    float temp = 0.8f;
    int top_k = 40;       // <= 0: all
    float top_p = 0.95f;  // >= 1: off
    uint64_t seed = 42;
};

struct sampler {
    sampler_params p;
    rng r;
    std::vector<std::pair<float, int>> cand;

    explicit sampler(const sampler_params & sp) : p(sp), r(sp.seed) {}

    int sample(const float * logits, int n_vocab) {
        if (p.temp <= 0.0f) return (int) (std::max_element(logits, logits + n_vocab) - logits);
        cand.resize((size_t) n_vocab);
        for (int i = 0; i < n_vocab; ++i) cand[(size_t) i] = {logits[i], i};
        auto by_logit = [](const std::pair<float, int> & a, const std::pair<float, int> & b) {
            return a.first > b.first || (a.first == b.first && a.second < b.second);
        };
        size_t k = p.top_k > 0 ? std::min((size_t) p.top_k, cand.size()) : cand.size();
        std::partial_sort(cand.begin(), cand.begin() + (long) k, cand.end(), by_logit);
        cand.resize(k);
        // softmax with temperature
        const float mx = cand[0].first;
        double sum = 0.0;
        for (auto & c : cand) { c.first = (float) std::exp((c.first - mx) / p.temp); sum += c.first; }
        for (auto & c : cand) c.first = (float) (c.first / sum);
        // top-p: smallest prefix whose mass reaches top_p
        if (p.top_p < 1.0f) {
            double acc = 0.0;
            size_t keep = cand.size();
            for (size_t i = 0; i < cand.size(); ++i) {
                acc += cand[i].first;
                if (acc >= p.top_p) { keep = i + 1; break; }
            }
            cand.resize(keep);
            double s2 = 0.0;
            for (auto & c : cand) s2 += c.first;
            for (auto & c : cand) c.first = (float) (c.first / s2);
        }
        const double u = r.uniform();
        double acc = 0.0;
        for (auto & c : cand) {
            acc += c.first;
            if (u < acc) return c.second;
        }
        return cand.back().second;
    }
};

} // namespace trun
