// example_checks.h - checks the example programs' tests share (whisper-encoder, unet-block):
// every compute buffer planned at its lower bound, a graph cut by the scheduler, a Vulkan device.
#pragma once

#include <catch2/catch.hpp>

#include "../../examples/common/graph_session.h"

#define REQUIRE_OK(expr) do { const bool ok_ = (expr); INFO(err); REQUIRE(ok_); } while (0)

namespace exw_test {

// gallocr packed every backend's compute buffer at its lower bound (the most bytes live at one step).
inline void check_plans_at_lower_bound(const exw::graph_session & g) {
    REQUIRE(g.compute.size() == g.backends.size());
    for (const tsr_backend_sched_buffer_info & c : g.compute) {
        INFO("planned " << c.planned_size << ", lower bound " << c.lower_bound << ", " << c.n_inputs << " input copies");
        CHECK(c.lower_bound > 0);
        CHECK(c.planned_size <= c.lower_bound);
    }
}

// The scheduler cut the graph between a device and the CPU at least twice each way
// (min_splits runs of nodes) and copied what crossed.
inline void check_cut(const exw::graph_session & g, int min_splits) {
    CHECK(g.n_splits >= min_splits);
    CHECK(g.n_split_inputs >= 2);
    REQUIRE(g.compute.size() == 2);
    check_plans_at_lower_bound(g);
}

// A backend on Vulkan's first device, or NULL with a warning when there is none.
inline tsr_backend_t open_vulkan() {
    if (tsr_backend_reg_dev_count(tsr_backend_reg_by_name("vulkan")) == 0) {
        WARN("skipped: no Vulkan device");
        return nullptr;
    }
    tsr_backend_t vk = tsr_backend_init_by_name("Vulkan0", "");
    INFO(tsr_last_error());
    REQUIRE(vk);
    return vk;
}

} // namespace exw_test
