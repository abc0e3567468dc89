// The vector expf and the row kernels built on it (exp, silu, sigmoid, gelu, gelu_quick,
// tanh, swiglu, soft_max, flash attention's softmax) on every ISA path, against double
// references, measured in ulp of the float grid at the reference.
#include "cpu_test_util.h"

#include <algorithm>
#include <cfloat>

using namespace cput;

namespace {

using op1 = tsr_tensor * (*)(tsr_context *, tsr_tensor *);

// op over `in` (1-D, out of place) on one ISA path with 2 threads.
std::vector<float> run_unary(tsr_cpu_isa isa, op1 op, const std::vector<float> & in) {
    ctx_holder ctx(in.size() * 8 / (1 << 20) + 8);
    tsr_tensor * a = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, (int64_t)in.size());
    std::memcpy(a->data, in.data(), in.size() * 4);
    tsr_tensor * c = op(ctx, a);
    REQUIRE(c != nullptr);
    isa_scope s(isa);
    backend_holder be(2);
    REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
    const float * d = (const float *)c->data;
    return std::vector<float>(d, d + in.size());
}

// The bound on every vector path is max_ulp + arg_ulp * |a(x)|, where a(x) is the argument
// the float formula hands to exp: rounding a(x) to float alone moves the result by up to
// about |a(x)| ulp (the libm path shows the same), so that part measures the formula's
// conditioning, not the kernel.
struct act {
    const char * name;
    op1 op;
    double (*ref)(double);
    float lo, hi;      // input range where the result is a normal float
    double max_ulp;
    double arg_ulp;
    double (*arg)(double);
};

double sigmoid_d(double x) { return 1 / (1 + std::exp(-x)); }
double silu_d(double x) { return x / (1 + std::exp(-x)); }
// 0.5 x (1 + tanh(u)) written as x / (1 + e^-2u): the same function without the cancellation
double gelu_u(double x) { return std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x); }
double gelu_d(double x) { return x / (1 + std::exp(-2 * gelu_u(x))); }
double gelu_arg(double x) { return 2 * gelu_u(x); }
double gelu_quick_arg(double x) { return 1.702 * x; }
double no_arg(double) { return 0; }
double gelu_quick_d(double x) { return x / (1 + std::exp(-1.702 * x)); }
double exp_d(double x) { return std::exp(x); }
double tanh_d(double x) { return std::tanh(x); }

const act acts[] = {
    {"exp", tsr_exp, exp_d, -104.0f, 89.0f, 2, 0, no_arg},
    {"sigmoid", tsr_sigmoid, sigmoid_d, -80.0f, 80.0f, 3, 0, no_arg},
    {"silu", tsr_silu, silu_d, -80.0f, 80.0f, 3, 0, no_arg},
    {"gelu", tsr_gelu, gelu_d, -9.0f, 20.0f, 4, 5, gelu_arg},
    {"gelu_quick", tsr_gelu_quick, gelu_quick_d, -45.0f, 45.0f, 3, 2, gelu_quick_arg},
    {"tanh", tsr_tanh, tanh_d, -20.0f, 20.0f, 3, 0, no_arg},
};

// Inputs in [lo, hi]: half uniform, a quarter in [-1, 1], a quarter tiny (1e-30 .. 1e-2).
std::vector<float> act_inputs(std::mt19937 & rng, size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi), u1(std::max(lo, -1.0f), std::min(hi, 1.0f)), lg(-30.0f, -2.0f);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        if (i % 4 < 2) v[i] = u(rng);
        else if (i % 4 == 2) v[i] = u1(rng);
        else v[i] = (rng() & 1 ? -1.0f : 1.0f) * std::pow(10.0f, lg(rng));
    }
    return v;
}

// out on every ISA with 1, 2 and 3 threads: within 1e-5 (NMSE 1e-10) of the double
// reference, and the same bits whatever the thread count.
void check_attention_every_isa(tsr_context * ctx, tsr_tensor * out, const std::vector<double> & ref, const std::string & what) {
    for (tsr_cpu_isa isa : isas()) {
        isa_scope s(isa);
        std::vector<std::vector<float>> by_threads;
        for (int nth : {1, 2, 3}) {
            backend_holder be(nth);
            REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
            const std::vector<double> got = values(out);
            INFO("isa " << tsr_cpu_isa_name(isa) << ", " << nth << " threads, " << what << ": max abs err " << max_abs_err(got, ref)
                        << ", nmse " << nmse(got, ref));
            CHECK(max_abs_err(got, ref) <= 1e-5);
            CHECK(nmse(got, ref) <= 1e-10);
            by_threads.emplace_back((const float *)out->data, (const float *)out->data + tsr_nelements(out));
        }
        INFO("isa " << tsr_cpu_isa_name(isa) << ", " << what);
        CHECK(std::memcmp(by_threads[0].data(), by_threads[1].data(), by_threads[0].size() * 4) == 0);
        CHECK(std::memcmp(by_threads[0].data(), by_threads[2].data(), by_threads[0].size() * 4) == 0);
    }
}

// Masks of consecutive decode steps (m: [n_kv, queries]): query i sees keys up to last + i,
// but never one of every 7th (from key 3).
void mask_decode_steps(tsr_tensor * m, int64_t last) {
    for (int64_t i = 0; i < m->ne[1]; ++i)
        for (int64_t j = 0; j < m->ne[0]; ++j)
            if (j > last + i || j % 7 == 3) tsr_set_f32_nd(m, j, i, 0, 0, -INFINITY);
}

} // namespace

// Runs c in place over data (its source's buffer; the op must allow it) on one ISA, 2 threads.
static void run_in_place(tsr_context * ctx, tsr_tensor * c, void * data, tsr_cpu_isa isa) {
    REQUIRE(c != nullptr);
    REQUIRE(tsr_op_can_inplace(c, 0));
    c->data = data;
    isa_scope s(isa);
    backend_holder be(2);
    REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
}

TEST_CASE("vector expf: <= 2 ulp over a dense sweep of [-104, 89], edge cases exact", "[cpu][ops][act]") {
    std::vector<float> in;
    const int N = 1 << 21;
    for (int i = 0; i < N; ++i) in.push_back((float)(-104.0 + 193.0 * i / (N - 1)));
    std::mt19937 rng(101);
    for (int i = 0; i < (1 << 20); ++i) {  // random bit patterns: every binade, tiny |x| included
        const float x = f32_from_bits(rng());
        if (std::fabs(x) <= 105.0f) in.push_back(x);
    }
    // around overflow, the normal/denormal boundary, the last denormal and -104 (below it the
    // x86 paths set 0 without computing): every float
    for (float c : {88.7228394f, -87.3365479f, -103.972076f, -103.278931f, -104.0f})
        for (float x = c, y = c; std::fabs(x - c) < 2e-4f; x = std::nextafter(x, INFINITY), y = std::nextafter(y, -INFINITY)) {
            in.push_back(x);
            in.push_back(y);
        }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, FLT_MAX, -FLT_MAX, 89.0f, -104.0f,
                              -150.0f, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f, 110.0f, -110.0f, 1e10f, -1e10f};
    for (float x : specials) in.push_back(x);
    for (tsr_cpu_isa isa : isas()) {
        const std::vector<float> out = run_unary(isa, tsr_exp, in);
        double worst = 0;
        float worst_x = 0;
        for (size_t i = 0; i < in.size(); ++i) {
            const double e = ulp_err(out[i], std::exp((double)in[i]));
            if (e > worst) { worst = e; worst_x = in[i]; }
        }
        INFO("isa " << tsr_cpu_isa_name(isa) << ": max " << worst << " ulp at x = " << worst_x << " over " << in.size() << " inputs");
        CHECK(worst <= 2.0);
        const size_t s0 = in.size() - sizeof(specials) / sizeof(specials[0]);
        CHECK(out[s0 + 0] == 1.0f);
        CHECK(out[s0 + 1] == 1.0f);
        CHECK(out[s0 + 2] == INFINITY);
        CHECK(out[s0 + 3] == 0.0f);
        CHECK(std::isnan(out[s0 + 4]));
        CHECK(std::isnan(out[s0 + 5]));
        CHECK(out[s0 + 6] == INFINITY);
        CHECK(out[s0 + 7] == 0.0f);
        CHECK(out[s0 + 8] == INFINITY);
        CHECK(out[s0 + 9] == 0.0f);
        CHECK(out[s0 + 12] == 0.0f);
        CHECK(out[s0 + 13] == 1.0f);
        CHECK(out[s0 + 15] == 1.0f);
        CHECK(out[s0 + 18] == INFINITY);
        CHECK(out[s0 + 19] == 0.0f);
    }
}

TEST_CASE("activations on every ISA: ulp bounds on odd lengths, in place on an unaligned view", "[cpu][ops][act]") {
    for (const act & a : acts)
        for (int64_t n : {1, 7, 33, 4097}) {
            std::mt19937 rng((unsigned)(int64_t)(n * 31 + a.lo));  // a.lo < 0: through int64_t (float to unsigned is UB)
            const std::vector<float> x = act_inputs(rng, (size_t)n, a.lo, a.hi);
            for (tsr_cpu_isa isa : isas()) {
                // buf = [sentinel, x..., sentinel x 16]: the op runs in place on the view of x
                ctx_holder ctx(2);
                tsr_tensor * buf = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n + 17);
                float * bp = (float *)buf->data;
                for (int64_t i = 0; i < n + 17; ++i) bp[i] = 12345.0f;
                std::memcpy(bp + 1, x.data(), (size_t)n * 4);
                tsr_tensor * src = tsr_view_1d(ctx, buf, n, 4);
                tsr_tensor * c = a.op(ctx, src);
                run_in_place(ctx, c, src->data, isa);
                double worst = 0, worst_excess = -INFINITY, worst_abs = 0;
                float worst_x = 0;
                for (int64_t i = 0; i < n; ++i) {
                    const double r = a.ref(x[(size_t)i]);
                    const double e = ulp_err(bp[1 + i], r);
                    worst_abs = std::max(worst_abs, std::fabs(bp[1 + i] - r));
                    worst = std::max(worst, e);
                    const double excess = e - a.arg_ulp * std::fabs(a.arg(x[(size_t)i]));
                    if (excess > worst_excess) { worst_excess = excess; worst_x = x[(size_t)i]; }
                }
                INFO(a.name << " n " << n << " isa " << tsr_cpu_isa_name(isa) << ": max " << worst << " ulp, max beyond the argument term "
                            << worst_excess << " ulp at x = " << worst_x << ", max abs " << worst_abs);
                if (isa == TSR_CPU_ISA_SCALAR && a.ref == gelu_d) {
                    // the libm path computes 1 + tanh(u), which cancels for x < 0
                    CHECK(worst_abs <= 1e-6);
                } else {
                    CHECK(worst_excess <= a.max_ulp);
                }
                CHECK(bp[0] == 12345.0f);
                for (int64_t i = n + 1; i < n + 17; ++i) CHECK(bp[i] == 12345.0f);
            }
        }
}

TEST_CASE("activations on every ISA: infinities, NaN, huge and signed zero inputs", "[cpu][ops][act]") {
    const std::vector<float> in = {INFINITY, -INFINITY, NAN, 1e30f, -1e30f, 0.0f, -0.0f, 1e-40f, 30.0f, -30.0f, 3.0f};
    struct expect { op1 op; std::vector<float> out; };  // NAN: any NaN; inputs whose reference is NaN too
    const std::vector<expect> ex = {
        {tsr_sigmoid, {1.0f, 0.0f, NAN, 1.0f, 0.0f, 0.5f, 0.5f, 0.5f, 1.0f, 9.357623e-14f, 0.95257413f}},
        {tsr_silu, {INFINITY, NAN, NAN, 1e30f, -0.0f, 0.0f, -0.0f, 5e-41f, 30.0f, -2.8072868e-12f, 2.8577223f}},
        {tsr_gelu, {INFINITY, NAN, NAN, 1e30f, -0.0f, 0.0f, -0.0f, 5e-41f, 30.0f, -0.0f, 2.9963626f}},
        {tsr_gelu_quick, {INFINITY, NAN, NAN, 1e30f, -0.0f, 0.0f, -0.0f, 5e-41f, 30.0f, -2.0046770e-21f, 2.9819287f}},
        {tsr_tanh, {1.0f, -1.0f, NAN, 1.0f, -1.0f, 0.0f, -0.0f, 1e-40f, 1.0f, -1.0f, 0.99505475f}},
    };
    for (const expect & e : ex)
        for (tsr_cpu_isa isa : isas()) {
            const std::vector<float> out = run_unary(isa, e.op, in);
            for (size_t i = 0; i < in.size(); ++i) {
                INFO("isa " << tsr_cpu_isa_name(isa) << " x = " << in[i] << " got " << out[i] << " want " << e.out[i]);
                if (std::isnan(e.out[i])) CHECK(std::isnan(out[i]));
                else if (e.out[i] == 0.0f || std::isinf(e.out[i])) {
                    CHECK(out[i] == e.out[i]);
                    CHECK(std::signbit(out[i]) == std::signbit(e.out[i]));
                } else {
                    CHECK(ulp_err(out[i], e.out[i]) <= 4.0);
                }
            }
        }
}

TEST_CASE("swiglu_split on every ISA: ulp bound on odd lengths, in place", "[cpu][ops][act]") {
    for (int64_t n : {1, 7, 33, 4097}) {
        std::mt19937 rng((unsigned)n);
        const std::vector<float> xv = act_inputs(rng, (size_t)n, -80.0f, 80.0f), gv = act_inputs(rng, (size_t)n, -3.0f, 3.0f);
        for (tsr_cpu_isa isa : isas()) {
            ctx_holder ctx(2);
            tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
            tsr_tensor * g = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
            std::memcpy(x->data, xv.data(), (size_t)n * 4);
            std::memcpy(g->data, gv.data(), (size_t)n * 4);
            tsr_tensor * c = tsr_swiglu_split(ctx, x, g);
            run_in_place(ctx, c, x->data, isa);
            double worst = 0;
            for (int64_t i = 0; i < n; ++i)
                worst = std::max(worst, ulp_err(((const float *)c->data)[i], silu_d(xv[(size_t)i]) * gv[(size_t)i]));
            INFO("n " << n << " isa " << tsr_cpu_isa_name(isa) << ": max " << worst << " ulp");
            CHECK(worst <= 4.0);
        }
    }
}

TEST_CASE("soft_max rows with -inf entries, all-masked rows (zeros), odd lengths", "[cpu][ops][act]") {
    for (int64_t n : {1, 7, 33, 4097}) {
        std::mt19937 rng((unsigned)(n + 7));
        std::uniform_real_distribution<float> u(-10.0f, 10.0f);
        // rows: 0 plain, 1 every third masked, 2 all masked, 3 only the last entry left
        const int64_t R = 4;
        std::vector<float> av((size_t)(n * R)), mv((size_t)(n * R));
        for (int64_t r = 0; r < R; ++r)
            for (int64_t i = 0; i < n; ++i) {
                av[(size_t)(r * n + i)] = u(rng);
                const bool masked = (r == 1 && i % 3 == 1) || r == 2 || (r == 3 && i != n - 1);
                mv[(size_t)(r * n + i)] = masked ? -INFINITY : 0.0f;
            }
        // x - max is rounded to float as every path computes it (that rounding alone is
        // worth up to |x - max| ulp of the result); the rest is held to 4 ulp
        std::vector<double> ref((size_t)(n * R));
        for (int64_t r = 0; r < R; ++r) {
            float mx = -INFINITY;
            double sum = 0;
            for (int64_t i = 0; i < n; ++i) mx = std::max(mx, av[(size_t)(r * n + i)] + mv[(size_t)(r * n + i)]);
            for (int64_t i = 0; i < n; ++i) {
                const float w = av[(size_t)(r * n + i)] + mv[(size_t)(r * n + i)];
                ref[(size_t)(r * n + i)] = mx == -INFINITY ? 0.0 : std::exp((double)(w - mx));
                sum += ref[(size_t)(r * n + i)];
            }
            for (int64_t i = 0; i < n; ++i) if (sum > 0) ref[(size_t)(r * n + i)] /= sum;
        }
        for (int variant = 0; variant < 2; ++variant)  // 0: soft_max_ext with an F32 mask; 1: soft_max of a + mask
            for (tsr_cpu_isa isa : isas()) {
                ctx_holder ctx(2);
                tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, R);
                tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, n, R);
                std::memcpy(m->data, mv.data(), mv.size() * 4);
                float * ap = (float *)a->data;
                for (size_t i = 0; i < av.size(); ++i) ap[i] = variant == 0 ? av[i] : av[i] + mv[i];
                tsr_tensor * c = variant == 0 ? tsr_soft_max_ext(ctx, a, m, 1.0f, 0.0f) : tsr_soft_max(ctx, a);
                REQUIRE(c != nullptr);
                isa_scope s(isa);
                backend_holder be(2);
                REQUIRE(run(be, ctx, c) == TSR_STATUS_SUCCESS);
                const float * d = (const float *)c->data;
                double worst = 0;
                for (size_t i = 0; i < ref.size(); ++i) {
                    if (mv[i] == -INFINITY) CHECK(d[i] == 0.0f);
                    worst = std::max(worst, ulp_err(d[i], ref[i]));
                }
                INFO("n " << n << " variant " << variant << " isa " << tsr_cpu_isa_name(isa) << ": max " << worst << " ulp");
                CHECK(worst <= 4.0);
            }
    }
}

TEST_CASE("flash_attn_ext over several key blocks: masked blocks, all-masked rows", "[cpu][ops][act]") {
    ctx_holder ctx(16);
    std::mt19937 rng(59);
    const int64_t D = 64, Dv = 32, nq = 6, nkv = 150, H = 2;
    tsr_tensor * q = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, nq, H);
    tsr_tensor * k = tsr_new_tensor_3d(ctx, TSR_TYPE_F16, D, nkv, H);
    tsr_tensor * v = tsr_new_tensor_3d(ctx, TSR_TYPE_F16, Dv, nkv, H);
    fill(q, rng, -2, 2);
    fill(k, rng, -2, 2);
    fill(v, rng);
    tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, nkv, 8);
    fill(m, rng, -1, 0);
    for (int64_t j = 0; j < nkv; ++j) {
        if (j < 64) tsr_set_f32_nd(m, j, 1, 0, 0, -INFINITY);                 // first block masked
        tsr_set_f32_nd(m, j, 2, 0, 0, -INFINITY);                             // everything masked
        if (j != nkv - 1) tsr_set_f32_nd(m, j, 3, 0, 0, -INFINITY);           // one key in the last block
        if (j >= 64 && j < 128) tsr_set_f32_nd(m, j, 4, 0, 0, -INFINITY);     // middle block masked
        tsr_set_f32_nd(m, j, 5, 0, 0, j < 100 ? -8.0f : 0.0f);                // the max rises in a later block
    }
    const float scale = 0.25f;
    tsr_tensor * out = tsr_flash_attn_ext(ctx, q, k, v, m, scale, 0.0f, 0.0f);
    REQUIRE(out != nullptr);
    const std::vector<double> ref = flash_attn_reference(q, k, v, m, scale, 0.0, 0.0);
    for (tsr_cpu_isa isa : isas()) {
        isa_scope s(isa);
        backend_holder be(2);
        REQUIRE(run(be, ctx, out) == TSR_STATUS_SUCCESS);
        const std::vector<double> got = values(out);
        const double worst = max_abs_err(got, ref);
        INFO("isa " << tsr_cpu_isa_name(isa) << ": max abs err " << worst << ", nmse " << nmse(got, ref));
        CHECK(worst <= 1e-5);
        CHECK(nmse(got, ref) <= 1e-10);
        for (int64_t h = 0; h < H; ++h)
            for (int64_t e = 0; e < Dv; ++e) CHECK(at(out, e, h, 2) == 0.0);
    }
}

// Prompts take the tiled path (16 queries of a head per tile, scores a vector of queries at a
// time). 37 queries: full tiles, a partial one, and thread splits that cut a head's queries
// anywhere; a causal mask with an offset (whole tiles skipped), GQA, softcap and ALiBi; Dv
// past whole vectors. Checked against double precision on every ISA, and a query's result
// must be the same bits whichever queries share its tile (1, 2 and 3 threads).
TEST_CASE("flash_attn_ext prompt tiles: every ISA against double; the same bits for any thread count", "[cpu][ops][act]") {
    struct cfg { tsr_type kv; int64_t Dv; float softcap, max_bias; };
    for (const cfg & c : {cfg{TSR_TYPE_F16, 72, 0.0f, 0.0f}, cfg{TSR_TYPE_F32, 40, 20.0f, 4.0f}}) {
        ctx_holder ctx(16);
        std::mt19937 rng(61);
        const int64_t D = 64, nq = 37, nkv = 150, H = 4, Hkv = 2;
        tsr_tensor * q = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, nq, H);
        tsr_tensor * k = tsr_new_tensor_3d(ctx, c.kv, D, nkv, Hkv);
        tsr_tensor * v = tsr_new_tensor_3d(ctx, c.kv, c.Dv, nkv, Hkv);
        fill(q, rng, -2, 2);
        fill(k, rng, -2, 2);
        fill(v, rng);
        tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, nkv, nq);
        fill(m, rng, -1, 0);
        for (int64_t i = 0; i < nq; ++i)
            for (int64_t j = 0; j < nkv; ++j)
                if (j > i + 70) tsr_set_f32_nd(m, j, i, 0, 0, -INFINITY);  // no query sees keys 107..149: the last block is skipped
        const float scale = 0.125f;
        tsr_tensor * out = tsr_flash_attn_ext(ctx, q, k, v, m, scale, c.max_bias, c.softcap);
        REQUIRE(out != nullptr);
        const std::vector<double> ref = flash_attn_reference(q, k, v, m, scale, c.max_bias, c.softcap);
        check_attention_every_isa(ctx, out, ref, tsr_type_name(c.kv));
    }
}

// Decode steps of a grouped-query model (1 or 3 queries per head, 4 query heads per K/V
// head) take the tiles too, a tile holding the queries of the heads that share a K/V head
// (4 or 12 rows): lanes of different heads, each with its own ALiBi slope, and thread splits
// that cut a group (3 threads: 3/3/2 and 8/8/8 rows). Against double on every ISA; the same
// bits for 1, 2 and 3 threads.
TEST_CASE("flash_attn_ext decode with grouped heads: every ISA against double; the same bits for any thread count", "[cpu][ops][act]") {
    struct cfg { tsr_type kv; int64_t n1; float softcap, max_bias; };
    for (const cfg & c : {cfg{TSR_TYPE_F16, 1, 0.0f, 0.0f}, cfg{TSR_TYPE_F16, 3, 0.0f, 4.0f}, cfg{TSR_TYPE_F32, 1, 20.0f, 4.0f}}) {
        ctx_holder ctx(16);
        std::mt19937 rng(67);
        const int64_t D = 64, Dv = 40, nkv = 150, H = 8, Hkv = 2;
        tsr_tensor * q = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, c.n1, H);
        tsr_tensor * k = tsr_new_tensor_3d(ctx, c.kv, D, nkv, Hkv);
        tsr_tensor * v = tsr_new_tensor_3d(ctx, c.kv, Dv, nkv, Hkv);
        fill(q, rng, -2, 2);
        fill(k, rng, -2, 2);
        fill(v, rng);
        tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, nkv, c.n1);
        fill(m, rng, -1, 0);
        mask_decode_steps(m, 120);
        const float scale = 0.125f;
        tsr_tensor * out = tsr_flash_attn_ext(ctx, q, k, v, m, scale, c.max_bias, c.softcap);
        REQUIRE(out != nullptr);
        const std::vector<double> ref = flash_attn_reference(q, k, v, m, scale, c.max_bias, c.softcap);
        check_attention_every_isa(ctx, out, ref, std::to_string(c.n1) + " queries per head");
    }
}

// Decode without grouped heads (GPT-2, LLaMA-2 7B: 1 or 2 queries per K/V head) takes the
// one-query path; with F16 K and V whose D and Dv are a multiple of the ISA's lanes, a block
// of keys per kernel call (fa_dots_h / fa_accum_h). K and V are views of a KV cache as the
// runner makes them (a head's rows a whole cache row apart), 150 of 160 positions; the keys
// every query masks (holes, and the causal padding past 122) hold NaN, as unwritten cache
// rows may: no result may read them. Dv 48: whole vectors on every ISA; 72: a tail on
// AVX-512 (the per-key path there). ALiBi and softcap on one configuration each. Against
// double on every ISA, the same bits for 1, 2 and 3 threads.
TEST_CASE("flash_attn_ext decode without grouped heads: KV-cache views, NaN in masked rows; every ISA against double", "[cpu][ops][act]") {
    struct cfg { int64_t Dv, n1; float softcap, max_bias; };
    for (const cfg & c : {cfg{48, 1, 0.0f, 0.0f}, cfg{72, 2, 0.0f, 4.0f}, cfg{48, 1, 20.0f, 0.0f}}) {
        ctx_holder ctx(16);
        std::mt19937 rng(71);
        const int64_t D = 64, n_ctx = 160, nkv = 150, H = 4;
        tsr_tensor * q = tsr_new_tensor_3d(ctx, TSR_TYPE_F32, D, c.n1, H);
        tsr_tensor * kc = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, D * H, n_ctx);
        tsr_tensor * vc = tsr_new_tensor_2d(ctx, TSR_TYPE_F16, c.Dv * H, n_ctx);
        fill(q, rng, -2, 2);
        fill(kc, rng, -2, 2);
        fill(vc, rng);
        tsr_tensor * k = tsr_view_3d(ctx, kc, D, nkv, H, kc->nb[1], (size_t)D * 2, 0);
        tsr_tensor * v = tsr_view_3d(ctx, vc, c.Dv, nkv, H, vc->nb[1], (size_t)c.Dv * 2, 0);
        tsr_tensor * m = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, nkv, c.n1);
        fill(m, rng, -1, 0);
        auto masked_for_all = [](int64_t j) { return j > 122 || j % 7 == 3; };
        mask_decode_steps(m, 121);
        const float scale = 0.125f;
        tsr_tensor * out = tsr_flash_attn_ext(ctx, q, k, v, m, scale, c.max_bias, c.softcap);
        REQUIRE(out != nullptr);
        const std::vector<double> ref = flash_attn_reference(q, k, v, m, scale, c.max_bias, c.softcap);
        for (int64_t j = 0; j < nkv; ++j) {
            if (!masked_for_all(j)) continue;
            for (int64_t h = 0; h < H; ++h) {
                for (int64_t e = 0; e < D; ++e) tsr_set_f32_nd(k, e, j, h, 0, NAN);
                for (int64_t e = 0; e < c.Dv; ++e) tsr_set_f32_nd(v, e, j, h, 0, NAN);
            }
        }
        check_attention_every_isa(ctx, out, ref, "Dv " + std::to_string(c.Dv) + ", " + std::to_string(c.n1) + " queries per head");
    }
}
