// The compute buffer tessera-run's scheduler plans on Vulkan for tiny LLaMA at -ngl 1, batch 64
// (the CPU layer's products offloaded to the GPU, its weights copied there): 37 buffers,
// aligned to 16 bytes, lower bound 171,264 bytes (step 29). Every greedy order piled its
// long-lived 256-byte buffers 256 bytes above the bound, and the search needed ~50,000 nodes
// for it (issue 14). Shared by tests/alloc and tests/bench/alloc_bench.
#ifndef TSR_TESTS_SCHED_TRACE_H
#define TSR_TESTS_SCHED_TRACE_H

#include "tessera/alloc.h"

#include <vector>

inline std::vector<tsr_pack_item> tsr_sched_llama_ngl1_b64_trace() {
    return {
        {1, 76, 16384, 0}, {2, 7, 256, 0}, {3, 8, 4096, 0}, {4, 59, 256, 0}, {5, 30, 16384, 0}, {7, 12, 8192, 0},
        {13, 15, 4096, 0}, {14, 17, 8192, 0}, {18, 30, 8192, 0}, {19, 36, 4096, 0}, {20, 36, 4096, 0}, {21, 63, 16384, 0},
        {22, 38, 8192, 0}, {23, 41, 256, 0}, {24, 42, 12288, 0}, {25, 43, 12288, 0}, {26, 45, 12288, 0}, {27, 75, 256, 0},
        {28, 76, 43520, 0}, {29, 36, 16384, 0}, {35, 38, 16384, 0}, {37, 39, 16384, 0}, {39, 43, 16384, 0}, {41, 45, 24576, 0},
        {42, 44, 24576, 0}, {44, 46, 16384, 0}, {46, 57, 16384, 0}, {48, 53, 8192, 0}, {53, 56, 8192, 0}, {56, 63, 16384, 0},
        {62, 65, 16384, 0}, {64, 66, 16384, 0}, {66, 70, 16384, 0}, {68, 72, 24576, 0}, {69, 71, 24576, 0}, {71, 73, 16384, 0},
        {75, 77, 87040, 0}
    };
}

#endif
