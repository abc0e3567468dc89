// libFuzzer target: graph building, gallocr planning and CPU compute from fuzz bytes.
// The bytes are a small program (scripts/gen-fuzz-corpus.py writes seeds in this form):
//
//   byte 0   context: room for (b % 64) tensor headers, plus the graph
//   byte 1   graph capacity (0, 1, 2, 3, 4, 8, 16, 64, ...)
//   byte 2   run settings: bit 0 two threads, bit 1 the best ISA (else scalar),
//            bit 2 a packing time budget for reserve, bit 3 alloc_graph without reserve
//   then     instructions (64 at most): an opcode byte and its argument bytes, until the bytes end;
//            operands are earlier tensors chosen by a byte (modulo how many exist);
//            the bytes are read in the order of the arguments (one read per statement
//            where a call takes several, since C++ leaves their order open)
//
// Every creation may fail (NULL + error): a failed one adds nothing and the program goes
// on. Memory comes from a host allocator that refuses more than 1 MiB at once, so shapes
// with huge dimensions must be refused by tessera with an error, not allocated, and
// allocation failures inside tessera get exercised. Input data comes from the bytes too.
// Build and run: scripts/fuzz.sh [seconds] graph
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/alloc.h"
#include "tessera-cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// Reads the program; past the end every read is 0, so each program terminates.
struct byte_reader {
    const uint8_t * data;
    size_t size;
    size_t pos = 0;
    bool done() const { return pos >= size; }
    uint8_t u8() { return pos < size ? data[pos++] : 0; }
    uint16_t u16() { return (uint16_t) (u8() | (u8() << 8)); }
    float f32() {
        // small exact values mostly, sometimes the special ones
        static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-6f, 1e30f, INFINITY, -INFINITY, NAN};
        const uint8_t b = u8();
        return b < 10 ? special[b] : (float) (int8_t) b / 16.0f;
    }
};

// A dimension: mostly small, sometimes 0, sometimes huge or negative (must be refused).
int64_t pick_dim(byte_reader & in) {
    static const int64_t big[] = {0, 1, 32, 33, 64, 256, 4096, 1 << 20, INT64_C(1) << 31, INT64_C(1) << 40,
                                  INT64_C(1) << 62, INT64_MAX, -1, INT64_MIN, 65536, 1000003};
    const uint8_t b = in.u8();
    if (b < 0xF0) return b % 9;
    return big[b & 0x0F];
}

int pick_int(byte_reader & in) { return (int) (int8_t) in.u8(); }

// Enum arguments stay inside each enum's value range: a value outside it is undefined
// behaviour in the C++ caller already (tsr_unary_op and tsr_type have room above their
// last enumerator, so unknown values of those are tried).

tsr_type pick_type(byte_reader & in) {
    static const tsr_type types[] = {TSR_TYPE_F32, TSR_TYPE_F32, TSR_TYPE_F32, TSR_TYPE_F16,
                                     TSR_TYPE_I32, TSR_TYPE_Q8_0, TSR_TYPE_Q4_0, TSR_TYPE_BF16};
    const uint8_t b = in.u8();
    if (b >= 0xF8) return (tsr_type) (b - 0xF8 + 3);  // invalid type values must be refused
    return types[b % 8];
}

// Host memory for buffers and the workspace, refusing single blocks over the cap so a
// plan for huge tensors fails inside tessera instead of tripping the fuzzer's limit.
constexpr size_t host_cap = size_t(1) << 20;
void * capped_alloc(size_t size, size_t align, void *) {
    if (size > host_cap) return nullptr;
    return aligned_alloc(align < sizeof(void *) ? sizeof(void *) : align, (size + align - 1) / align * align);
}
void capped_free(void * ptr, void *) { free(ptr); }
const tsr_host_allocator capped_host = {capped_alloc, capped_free, nullptr};

struct program {
    tsr_context * ctx = nullptr;
    std::vector<tsr_tensor *> t;
    tsr_tensor * pick(byte_reader & in) { return t.empty() ? nullptr : t[in.u8() % t.size()]; }
    void keep(tsr_tensor * r) {
        if (r) t.push_back(r);
    }
};

enum opcode : uint8_t {
    OP_NEW, OP_UNARY, OP_BINARY, OP_MUL_MAT, OP_VIEW, OP_RESHAPE, OP_PERMUTE, OP_TRANSPOSE, OP_CPY, OP_CONT,
    OP_REDUCE, OP_NORM, OP_ROWS, OP_SOFT_MAX, OP_ROPE, OP_SHAPE, OP_CONV, OP_ATTN, OP_COUNT_
};

tsr_tensor * new_tensor(program & p, byte_reader & in) {
    const tsr_type type = pick_type(in);
    const int n_dims = 1 + in.u8() % 4;
    int64_t ne[4];
    for (int i = 0; i < n_dims; ++i) ne[i] = pick_dim(in);
    const bool input = in.u8() & 1;
    tsr_tensor * r = tsr_new_tensor(p.ctx, type, n_dims, ne);
    if (r && input) tsr_set_input(r);
    return r;
}

tsr_tensor * unary(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    const uint8_t which = in.u8();
    switch (which % 20) {
        case 0: return tsr_unary(p.ctx, a, (tsr_unary_op) (in.u8() % (TSR_UNARY_OP_COUNT + 2)));
        /* issue 17 part A */
        case 12: return in.u8() & 1 ? tsr_sin(p.ctx, a) : tsr_leaky_relu(p.ctx, a, in.f32(), in.u8() & 1);
        case 13: return in.u8() & 1 ? tsr_fill(p.ctx, a, in.f32()) : tsr_fill_inplace(p.ctx, a, in.f32());
        case 14: return tsr_tri(p.ctx, a, (tsr_tri_type) (in.u8() % 4));   // past 3: not a value of the enum (UB in C++)
        case 15: return in.u8() & 1 ? tsr_cumsum(p.ctx, a) : tsr_diag(p.ctx, a);
        case 16: return tsr_l2_norm(p.ctx, a, in.f32());
        case 17: return tsr_top_k(p.ctx, a, pick_int(in));
        case 18: { const uint8_t g = in.u8(); return tsr_glu(p.ctx, a, (tsr_glu_op) (g % (TSR_GLU_OP_COUNT + 1)), g & 128); }
        case 1: return tsr_sqr(p.ctx, a);
        case 2: return tsr_sqrt(p.ctx, a);
        case 3: return tsr_log(p.ctx, a);
        case 4: return tsr_scale(p.ctx, a, in.f32());
        case 5: return tsr_scale_inplace(p.ctx, a, in.f32());
        case 6: { const float lo = in.f32(); return tsr_clamp(p.ctx, a, lo, in.f32()); }
        case 7: return tsr_swiglu(p.ctx, a);
        case 8: return tsr_dup(p.ctx, a);
        case 9: return tsr_diag_mask_inf(p.ctx, a, pick_int(in));
        case 10: return tsr_argsort(p.ctx, a, (tsr_sort_order) (in.u8() % 2));
        default: return tsr_view_tensor(p.ctx, a);
    }
}

tsr_tensor * binary(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    tsr_tensor * b = p.pick(in);
    switch (in.u8() % 12) {
        case 0: return tsr_add(p.ctx, a, b);
        /* issue 17 part A */
        case 9: {
            const size_t nb1 = in.u16(), nb2 = in.u16(), nb3 = in.u16(), offs = in.u16();
            return in.u8() & 1 ? tsr_acc(p.ctx, a, b, nb1, nb2, nb3, offs) : tsr_set_inplace(p.ctx, a, b, nb1, nb2, nb3, offs);
        }
        case 10: return tsr_repeat_back(p.ctx, a, b);
        case 11: return tsr_glu_split(p.ctx, a, b, (tsr_glu_op) (in.u8() % TSR_GLU_OP_COUNT));
        case 1: return tsr_sub(p.ctx, a, b);
        case 2: return tsr_mul(p.ctx, a, b);
        case 3: return tsr_div(p.ctx, a, b);
        case 4: return tsr_add_inplace(p.ctx, a, b);
        case 5: return tsr_mul_inplace(p.ctx, a, b);
        case 6: return tsr_swiglu_split(p.ctx, a, b);
        case 7: return tsr_repeat(p.ctx, a, b);
        default: return tsr_concat(p.ctx, a, b, pick_int(in) % 5);
    }
}

tsr_tensor * mul_mat(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    tsr_tensor * b = p.pick(in);
    return in.u8() & 1 ? tsr_out_prod(p.ctx, a, b) : tsr_mul_mat(p.ctx, a, b);
}

tsr_tensor * view(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    const uint8_t which = in.u8() % 4;
    const int64_t ne0 = pick_dim(in), ne1 = pick_dim(in), ne2 = pick_dim(in), ne3 = pick_dim(in);
    const size_t nb1 = in.u16(), nb2 = in.u16(), nb3 = in.u16(), offs = in.u16();
    switch (which) {
        case 0: return tsr_view_1d(p.ctx, a, ne0, offs);
        case 1: return tsr_view_2d(p.ctx, a, ne0, ne1, nb1, offs);
        case 2: return tsr_view_3d(p.ctx, a, ne0, ne1, ne2, nb1, nb2, offs);
        default: return tsr_view_4d(p.ctx, a, ne0, ne1, ne2, ne3, nb1, nb2, nb3, offs);
    }
}

tsr_tensor * reshape(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    const uint8_t which = in.u8() % 5;
    const int64_t ne0 = pick_dim(in), ne1 = pick_dim(in), ne2 = pick_dim(in), ne3 = pick_dim(in);
    switch (which) {
        case 0: return tsr_reshape_1d(p.ctx, a, ne0);
        case 1: return tsr_reshape_2d(p.ctx, a, ne0, ne1);
        case 2: return tsr_reshape_3d(p.ctx, a, ne0, ne1, ne2);
        case 3: return tsr_reshape_4d(p.ctx, a, ne0, ne1, ne2, ne3);
        default: return tsr_reshape(p.ctx, a, p.pick(in));
    }
}

tsr_tensor * permute(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    const uint8_t b = in.u8();
    // usually a permutation of 0..3; sometimes repeated or out-of-range axes
    static const int perms[][4] = {{0, 1, 2, 3}, {1, 0, 2, 3}, {0, 2, 1, 3}, {2, 1, 0, 3}, {3, 2, 1, 0}, {1, 2, 3, 0}, {0, 0, 1, 2}, {4, 1, 2, 3}, {-1, 0, 1, 2}};
    const int * ax = perms[b % 9];
    return tsr_permute(p.ctx, a, ax[0], ax[1], ax[2], ax[3]);
}

tsr_tensor * copy(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    switch (in.u8() % 3) {
        case 0: return tsr_cpy(p.ctx, a, p.pick(in));
        case 1: return tsr_cast(p.ctx, a, pick_type(in));
        default: {
            tsr_tensor * values = p.pick(in);
            return tsr_set_rows(p.ctx, a, values, p.pick(in));
        }
    }
}

tsr_tensor * cont(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    const uint8_t which = in.u8() % 3;
    const int64_t ne0 = pick_dim(in), ne1 = pick_dim(in), ne2 = pick_dim(in), ne3 = pick_dim(in);
    switch (which) {
        case 0: return tsr_cont(p.ctx, a);
        case 1: return tsr_cont_2d(p.ctx, a, ne0, ne1);
        default: return tsr_cont_4d(p.ctx, a, ne0, ne1, ne2, ne3);
    }
}

tsr_tensor * reduce(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    switch (in.u8() % 4) {
        case 0: return tsr_sum(p.ctx, a);
        case 1: return tsr_sum_rows(p.ctx, a);
        case 2: return tsr_mean(p.ctx, a);
        default: return tsr_argmax(p.ctx, a);
    }
}

tsr_tensor * norm(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    const uint8_t which = in.u8() % 3;
    const float eps = in.f32();
    switch (which) {
        case 0: return tsr_norm(p.ctx, a, eps);
        case 1: return tsr_rms_norm(p.ctx, a, eps);
        default: return tsr_group_norm(p.ctx, a, pick_int(in), eps);
    }
}

tsr_tensor * rows(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    return tsr_get_rows(p.ctx, a, p.pick(in));
}

tsr_tensor * soft_max(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    if (in.u8() & 1) return tsr_soft_max(p.ctx, a);
    tsr_tensor * mask = in.u8() & 1 ? p.pick(in) : nullptr;
    const float scale = in.f32();
    return tsr_soft_max_ext(p.ctx, a, mask, scale, in.f32());
}

tsr_tensor * rope(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    tsr_tensor * pos = p.pick(in);
    const int n_dims = pick_int(in), mode = in.u8() & 2;
    if (in.u8() & 1) return tsr_rope(p.ctx, a, pos, n_dims, mode);
    tsr_tensor * freq = in.u8() & 1 ? p.pick(in) : nullptr;
    const float base = in.f32(), fscale = in.f32(), ext = in.f32();
    return tsr_rope_ext(p.ctx, a, pos, freq, n_dims, mode, pick_int(in), base, fscale, ext, 1.0f, 32.0f, 1.0f);
}

tsr_tensor * shape(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    switch (in.u8() % 4) {
        case 0: {
            const int factor = pick_int(in);
            return tsr_upscale(p.ctx, a, factor, (tsr_scale_mode) (in.u8() % 2));
        }
        case 1: {
            const int n0 = pick_int(in), n1 = pick_int(in), n2 = pick_int(in), n3 = pick_int(in);
            return tsr_upscale_ext(p.ctx, a, n0, n1, n2, n3, (tsr_scale_mode) (in.u8() % 2));
        }
        case 2: {
            const int p0 = pick_int(in), p1 = pick_int(in), p2 = pick_int(in);
            return tsr_pad(p.ctx, a, p0, p1, p2, pick_int(in));
        }
        default: {
            const int k0 = pick_int(in), k1 = pick_int(in), s0 = pick_int(in), s1 = pick_int(in);
            const float p0 = in.f32(), p1 = in.f32();
            return tsr_pool_2d(p.ctx, a, (tsr_op_pool) (in.u8() % 2), k0, k1, s0, s1, p0, p1);
        }
    }
}

tsr_tensor * conv(program & p, byte_reader & in) {
    tsr_tensor * a = p.pick(in);
    tsr_tensor * b = p.pick(in);
    const uint8_t which = in.u8();
    const int s0 = pick_int(in), s1 = pick_int(in), p0 = pick_int(in), p1 = pick_int(in), d0 = pick_int(in), d1 = pick_int(in);
    if (which & 1) return tsr_conv_2d(p.ctx, a, b, s0, s1, p0, p1, d0, d1);
    return tsr_im2col(p.ctx, a, b, s0, s1, p0, p1, d0, d1, (which & 2) != 0, (which & 4) ? TSR_TYPE_F16 : TSR_TYPE_F32);
}

tsr_tensor * attn(program & p, byte_reader & in) {
    tsr_tensor * q = p.pick(in);
    tsr_tensor * k = p.pick(in);
    tsr_tensor * v = p.pick(in);
    tsr_tensor * mask = in.u8() & 1 ? p.pick(in) : nullptr;
    const float scale = in.f32(), max_bias = in.f32();
    return tsr_flash_attn_ext(p.ctx, q, k, v, mask, scale, max_bias, in.f32());
}

tsr_tensor * step(program & p, byte_reader & in) {
    const uint8_t op = in.u8() % OP_COUNT_;
    if (op == OP_NEW || p.t.empty()) return new_tensor(p, in);
    switch (op) {
        case OP_UNARY: return unary(p, in);
        case OP_BINARY: return binary(p, in);
        case OP_MUL_MAT: return mul_mat(p, in);
        case OP_VIEW: return view(p, in);
        case OP_RESHAPE: return reshape(p, in);
        case OP_PERMUTE: return permute(p, in);
        case OP_TRANSPOSE: return tsr_transpose(p.ctx, p.pick(in));
        case OP_CPY: return copy(p, in);
        case OP_CONT: return cont(p, in);
        case OP_REDUCE: return reduce(p, in);
        case OP_NORM: return norm(p, in);
        case OP_ROWS: return rows(p, in);
        case OP_SOFT_MAX: return soft_max(p, in);
        case OP_ROPE: return rope(p, in);
        case OP_SHAPE: return shape(p, in);
        case OP_CONV: return conv(p, in);
        default: return attn(p, in);
    }
}

size_t graph_capacity(uint8_t b) {
    static const size_t sizes[] = {0, 1, 2, 3, 4, 5, 8, 16, 64, TSR_DEFAULT_GRAPH_SIZE};
    return sizes[b % 10];
}

// Input data from the bytes (cycled); I32 tensors get small indices, some out of range.
void fill_inputs(tsr_cgraph * g, const uint8_t * data, size_t size) {
    std::vector<uint8_t> buf;
    for (int i = 0; i < tsr_graph_n_leafs(g); ++i) {
        tsr_tensor * t = tsr_graph_leaf(g, i);
        if (!t->buffer || !t->data || t->view_src) continue;
        const size_t n = tsr_nbytes(t);
        buf.resize(n);
        for (size_t k = 0; k < n; ++k) buf[k] = size ? data[(k * 7 + (size_t) i) % size] : 0;
        if (t->type == TSR_TYPE_I32) {
            for (size_t k = 0; k + 4 <= n; k += 4) {
                const int32_t v = (int32_t) (int8_t) buf[k] % 12;
                memcpy(&buf[k], &v, 4);
            }
        }
        if (!tsr_backend_tensor_set(t, buf.data(), 0, n)) __builtin_trap();  // an allocated leaf takes its bytes
    }
}

struct cpu_backends {
    tsr_backend_t one = nullptr, two = nullptr;
    tsr_backend_buffer_type_t buft = nullptr;
    cpu_backends() {
        tsr_set_error_callback(nullptr, nullptr);  // "return an error" mode: nothing aborts
        buft = tsr_backend_cpu_buffer_type_with_allocator(&capped_host);
        one = tsr_backend_cpu_init();
        two = tsr_backend_cpu_init();
        if (!buft || !one || !two) abort();
        tsr_backend_cpu_set_n_threads(one, 1);
        tsr_backend_cpu_set_n_threads(two, 2);
        tsr_backend_cpu_set_host_allocator(one, &capped_host);
        tsr_backend_cpu_set_host_allocator(two, &capped_host);
    }
};

// Multiply-adds a graph costs, roughly: the host cap bounds every tensor, but attention,
// matrix products and convolutions on two 1 MiB operands can still take minutes, which
// is the work asked for, not a hang. Such graphs are planned but not computed.
double node_work(const tsr_tensor * t) {
    const tsr_tensor * a = t->src[0];
    const double out = (double) tsr_nelements(t);
    switch (t->op) {
        case TSR_OP_MUL_MAT: return out * (double) a->ne[0];
        case TSR_OP_OUT_PROD: return out * (double) a->ne[1];
        case TSR_OP_CONV_2D: return out * (double) a->ne[0] * (double) a->ne[1] * (double) a->ne[2];
        case TSR_OP_POOL_2D: return out * tsr_get_op_params_i32(t, 1) * tsr_get_op_params_i32(t, 2);
        case TSR_OP_FLASH_ATTN_EXT: return (double) tsr_nelements(a) * (double) t->src[1]->ne[1] * 2.0;
        default: break;
    }
    double work = out;
    for (const tsr_tensor * s : t->src)
        if (s) work = std::max(work, (double) tsr_nelements(s));
    return work;
}

bool cheap_enough(tsr_cgraph * g) {
    double work = 0;
    for (int i = 0; i < tsr_graph_n_nodes(g); ++i) work += node_work(tsr_graph_node(g, i));
    return work < double(1 << 25);
}

// TSR_FUZZ_VERBOSE=1: say how far each input got and print its graph (to check that a
// seed reaches compute)
bool verbose() {
    static const bool on = getenv("TSR_FUZZ_VERBOSE") != nullptr;
    return on;
}
void trace(const char * what, bool ok) {
    if (verbose()) fprintf(stderr, "graph_fuzz: %s: %s%s\n", what, ok ? "ok" : "failed: ", ok ? "" : tsr_last_error());
}

void plan_and_run(const cpu_backends & cpu, uint8_t settings, tsr_cgraph * g, const uint8_t * data, size_t size) {
    tsr_cpu_set_isa((settings & 2) ? tsr_cpu_isa_best() : TSR_CPU_ISA_SCALAR);
    tsr_backend_t backend = (settings & 1) ? cpu.two : cpu.one;
    tsr_gallocr_t galloc = tsr_gallocr_new(cpu.buft);
    if (!galloc) return;
    tsr_gallocr_set_time_budget(galloc, (settings & 4) ? 0.2 : 0.0);
    const bool planned = (settings & 8) ? true : tsr_gallocr_reserve(galloc, g);
    trace("reserve", planned);
    const bool allocated = planned && tsr_gallocr_alloc_graph(galloc, g);
    if (planned) trace("alloc_graph", allocated);
    if (verbose()) tsr_graph_print(g, stderr);
    if (allocated && cheap_enough(g)) {
        const tsr_plan * plan = tsr_gallocr_get_plan(galloc);
        if (plan && !tsr_plan_check(plan, nullptr)) __builtin_trap();  // a plan tessera made must check
        fill_inputs(g, data, size);
        trace("compute", tsr_backend_graph_compute(backend, g) == TSR_STATUS_SUCCESS);
    }
    tsr_gallocr_free(galloc);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    static const cpu_backends cpu;
    byte_reader in{data, size};
    const size_t n_headers = in.u8() % 64;
    const size_t capacity = graph_capacity(in.u8());
    const uint8_t settings = in.u8();

    program p;
    tsr_init_params ip = {n_headers * tsr_tensor_overhead() + tsr_graph_overhead_custom(capacity, false), nullptr, true};
    p.ctx = tsr_init(ip);
    if (!p.ctx) return 0;
    tsr_cgraph * g = tsr_new_graph_custom(p.ctx, capacity, false);
    for (int n = 0; n < 64 && !in.done(); ++n) p.keep(step(p, in));

    // the graph of the last results (up to 9 of them, the newest first); a failed expand
    // leaves the graph as it was, so what was built before it still plans and computes
    bool built = g != nullptr;
    for (size_t i = p.t.size(); built && i-- > 0;) {
        if (p.t[i]->op != TSR_OP_NONE) built = tsr_build_forward_expand(g, p.t[i]);
        if (i + 8 < p.t.size()) break;
    }
    if (g) {
        trace("build", built);
        plan_and_run(cpu, settings, g, data, size);
    }
    tsr_free(p.ctx);
    return 0;
}
