// Helpers for the Vulkan backend tests: the Vulkan backend shared by all tests, and
// running a graph on it with its graph statistics. Building, filling, reading and
// comparing graphs is the shared test support (tests/support/backend_support.h).
#pragma once
#include "backend_support.h"
#include "tessera-vulkan.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace vkt {

using namespace tsrt;

// The Vulkan backend shared by all tests (NULL when there is no device; vk_reason() says why).
inline std::string & vk_reason() {
    static std::string reason;
    return reason;
}

inline tsr_backend_t vk() {
    static tsr_backend_t be = [] {
        tsr_backend_t b = tsr_backend_vk_init(-1);
        if (!b) vk_reason() = tsr_last_error();
        return b;
    }();
    return be;
}

#define VK_OR_SKIP()                                                              \
    do {                                                                          \
        if (!vkt::vk()) {                                                         \
            WARN("skipped: no usable Vulkan device: " << vkt::vk_reason());       \
            return;                                                               \
        }                                                                         \
    } while (0)

struct result : run_result {
    tsr_vk_graph_stats stats{};   // of the run (Vulkan backends)
};

// run_graph, plus the Vulkan graph statistics of the compute.
inline result run(tsr_backend_t be, const graph_builder & b, uint32_t seed = 1234, int n_tensors = 256) {
    result r;
    static_cast<run_result &>(r) = run_graph(be, b, seed, n_tensors);
    if (r.ok && tsr_backend_is_vk(be)) r.stats = tsr_backend_vk_get_graph_stats(be);
    return r;
}

} // namespace vkt
