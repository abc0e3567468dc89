// The table of op cases that test_backend_ops runs on every backend (each CPU ISA path
// other than scalar, Vulkan, CUDA) against the CPU backend's scalar path, in the manner of
// ggml's tests/test-backend-ops.cpp.
//
// A case is filled by named fields, never by position:
//
//   T.add("soft_max_ext mask + ALiBi")
//       .input(tensor(TSR_TYPE_F32, 45, 7, 6, 2).range(-3, 3))
//       .input(tensor(TSR_TYPE_F16, 45, 8).range(-1, 0))
//       .op([](tsr_context * c, const tensors & x) { return tsr_soft_max_ext(c, x[0], x[1], 0.3f, 8.0f); })
//       .nmse(1e-8);
//
// Each input is a tensor the harness creates and fills (seeded), optionally seen by the op
// through a view: permuted, transposed, or a window of wider rows at an offset.
#pragma once
#include "backend_support.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace bops {

using tensors = std::vector<tsr_tensor *>;

struct tensor_spec {
    tsr_type type = TSR_TYPE_F32;
    int64_t ne[4] = {1, 1, 1, 1};   // the tensor created (before any view below)
    int64_t row_pad = 0;            // created with rows of ne[0] + row_pad elements ...
    int64_t row_offset = 0;         // ... and the op sees ne[0] of them from this element on
    bool transpose = false;         // then transposed
    int axes[4] = {0, 1, 2, 3};     // then permuted (tsr_permute's axes)
    float lo = -1.0f, hi = 1.0f;    // uniform values in [lo, hi)
    std::vector<int32_t> ints;      // I32 tensors: these values, repeated (empty: 0, 1, 2, ...)
    std::vector<float> values;      // float tensors: exactly these values (masks with -inf)
    std::vector<std::pair<size_t, float>> specials;   // float tensors: uniform, then these (index, value) set


    tensor_spec & range(float lo_, float hi_) { lo = lo_; hi = hi_; return *this; }
    tensor_spec & i32(std::vector<int32_t> v) { ints = std::move(v); return *this; }
    tensor_spec & exact(std::vector<float> v) { values = std::move(v); return *this; }
    tensor_spec & with(std::vector<std::pair<size_t, float>> v) { specials = std::move(v); return *this; }
    tensor_spec & transposed() { transpose = true; return *this; }
    tensor_spec & permuted(int a0, int a1, int a2, int a3) { axes[0] = a0; axes[1] = a1; axes[2] = a2; axes[3] = a3; return *this; }
    tensor_spec & in_wider_rows(int64_t pad, int64_t offset) { row_pad = pad; row_offset = offset; return *this; }
    bool is_permuted() const { return axes[0] != 0 || axes[1] != 1 || axes[2] != 2 || axes[3] != 3; }
    std::string describe() const;   // "f16[64,10,3]", "f32[31,17]^T", "q8_0[64+32@32,19]", "f32[7,3]+nan/inf", ...
};

inline tensor_spec tensor(tsr_type type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
    tensor_spec s;
    s.type = type;
    s.ne[0] = ne0;
    s.ne[1] = ne1;
    s.ne[2] = ne2;
    s.ne[3] = ne3;
    return s;
}

// Builds the op (or a few) from the inputs as the op sees them; returns the output.
using op_fn = std::function<tsr_tensor *(tsr_context *, const tensors &)>;

struct op_case {
    std::string name;                  // what is checked: "add", "rope neox", "cpy into a view"
    std::vector<tensor_spec> inputs;
    op_fn make;
    double max_nmse = -1.0;            // required: NMSE against the CPU scalar path

    op_case & input(const tensor_spec & t) { inputs.push_back(t); return *this; }
    op_case & op(op_fn f) { make = std::move(f); return *this; }
    op_case & nmse(double e) { max_nmse = e; return *this; }

    std::string describe() const;      // the name and every input
    tsrt::graph_builder builder() const;
};

struct case_table {
    std::vector<op_case> cases;
    op_case & add(const std::string & name) {
        cases.emplace_back();
        cases.back().name = name;
        return cases.back();
    }
};

// Every case, built once.
const std::vector<op_case> & op_cases();

} // namespace bops
