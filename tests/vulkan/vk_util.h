// Test helpers for the Vulkan backend: the shared backends, building a graph twice
// (once per backend) from a deterministic builder, filling inputs, reading outputs,
// normalized mean squared error.
#pragma once
#include <catch2/catch.hpp>

#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"
#include "tessera-vulkan.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace vkt {

// The Vulkan backend shared by all tests (NULL when there is no device; reason() says why).
tsr_backend_t vk();
const std::string & vk_reason();
tsr_backend_t cpu();

#define VK_OR_SKIP()                                                              \
    do {                                                                          \
        if (!vkt::vk()) {                                                         \
            WARN("skipped: no usable Vulkan device: " << vkt::vk_reason());       \
            return;                                                               \
        }                                                                         \
    } while (0)

struct input {
    tsr_tensor * t = nullptr;
    std::vector<int32_t> ints;   // I32 tensors: these values
    std::vector<float> values;   // float tensors: these values when not empty
    bool pattern = false;        // float tensors: pattern_value(i, seed) (cheap, for huge tensors)
    float lo = -1.0f, hi = 1.0f; // float tensors: uniform in [lo, hi], converted to t's type
};

struct graph_def {
    std::vector<input> inputs;
    tsr_tensor * add(tsr_tensor * t, float lo = -1.0f, float hi = 1.0f) {
        input in; in.t = t; in.lo = lo; in.hi = hi; inputs.push_back(in); return t;
    }
    tsr_tensor * add_f32(tsr_tensor * t, std::vector<float> v) {
        input in; in.t = t; in.values = std::move(v); inputs.push_back(in); return t;
    }
    tsr_tensor * add_pattern(tsr_tensor * t) {
        input in; in.t = t; in.pattern = true; inputs.push_back(in); return t;
    }
    tsr_tensor * add_i32(tsr_tensor * t, std::vector<int32_t> v) {
        input in; in.t = t; in.ints = std::move(v); inputs.push_back(in); return t;
    }
};

// Builds the graph in ctx (tensors without data), registers inputs in def, returns the output.
using builder = std::function<tsr_tensor *(tsr_context *, graph_def &)>;

struct result {
    bool ok = false;
    std::string error;
    std::vector<float> out;       // the output in logical order (F32/F16 outputs)
    tsr_vk_graph_stats stats{};
};

// Upload an input's values (seeded random, pattern, or the given values) to its tensor.
void fill(const input & in, uint32_t seed);

// Build, allocate every tensor in one buffer of be, fill inputs (seeded), compute, read.
result run(tsr_backend_t be, const builder & b, uint32_t seed = 1234, int n_tensors = 256);

// Deterministic values in [-1, 1) for element i of an input filled with add_pattern (the
// seed is the one run() gives that input: run's seed + 7919 * input index).
inline float pattern_value(uint64_t i, uint32_t seed) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (seed * 40503u);
    h ^= h >> 15;
    return static_cast<float>(h & 1023u) / 512.0f - 1.0f;
}

double nmse(const std::vector<float> & out, const std::vector<float> & ref);

// Run on Vulkan and on the CPU backend; REQUIRE both ran and NMSE <= max_nmse.
void compare(const builder & b, double max_nmse, const char * what, uint32_t seed = 1234);

} // namespace vkt
