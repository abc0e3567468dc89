// Graphs: deduplicated topological order, leafs, capacity errors, views, print, dot.
#include "test_util.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace {

// Every node comes after all its sources that are in the graph; nothing appears twice;
// leafs have no op (and are not params); nodes have one.
void check_topological(const tsr_cgraph * g) {
    std::set<const tsr_tensor *> seen;
    for (int i = 0; i < tsr_graph_n_leafs(g); i++) {
        const tsr_tensor * l = tsr_graph_leaf(g, i);
        CHECK(l->op == TSR_OP_NONE);
        CHECK(seen.insert(l).second);
    }
    for (int i = 0; i < tsr_graph_n_nodes(g); i++) {
        const tsr_tensor * n = tsr_graph_node(g, i);
        for (int s = 0; s < TSR_MAX_SRC; s++) {
            if (n->src[s] && n->src[s] != n) CHECK(seen.count(n->src[s]) == 1);
        }
        CHECK(seen.insert(n).second);
    }
}

int index_of(const tsr_cgraph * g, const tsr_tensor * t) {
    for (int i = 0; i < tsr_graph_n_nodes(g); i++) {
        if (tsr_graph_node(g, i) == t) return i;
    }
    return -1;
}

} // namespace

TEST_CASE("diamond: each tensor once, sources first", "[graph]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * x = tsr_set_name(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 8), "x");
    tsr_tensor * w = tsr_set_name(tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 8), "w");
    tsr_tensor * a = tsr_set_name(tsr_mul(ctx, x, w), "a");
    tsr_tensor * b = tsr_set_name(tsr_silu(ctx, a), "b");
    tsr_tensor * c = tsr_set_name(tsr_sqr(ctx, a), "c");
    tsr_tensor * d = tsr_set_name(tsr_add(ctx, b, c), "d");
    tsr_tensor * e = tsr_set_name(tsr_add(ctx, d, x), "e");  // x reused deep and shallow

    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, e));
    CHECK(tsr_graph_n_nodes(g) == 5);
    CHECK(tsr_graph_n_leafs(g) == 2);
    check_topological(g);
    CHECK(tsr_graph_leaf(g, 0) == x);  // visit order: src[0] first
    CHECK(tsr_graph_leaf(g, 1) == w);
    // ggml's depth-first order: a, b, c, d, e
    CHECK(tsr_graph_node(g, 0) == a);
    CHECK(tsr_graph_node(g, 1) == b);
    CHECK(tsr_graph_node(g, 2) == c);
    CHECK(tsr_graph_node(g, 3) == d);
    CHECK(tsr_graph_node(g, -1) == e);
    CHECK(tsr_graph_node(g, -5) == a);
    tsr_clear_error();
    CHECK(tsr_graph_node(g, 5) == nullptr);
    CHECK(std::strlen(tsr_last_error()) > 0);
    CHECK(tsr_graph_node(g, -6) == nullptr);

    // expanding again, or with a tensor already inside, changes nothing
    REQUIRE(tsr_build_forward_expand(g, e));
    REQUIRE(tsr_build_forward_expand(g, b));
    CHECK(tsr_graph_n_nodes(g) == 5);
    CHECK(tsr_graph_n_leafs(g) == 2);

    CHECK(tsr_graph_get_tensor(g, "c") == c);
    CHECK(tsr_graph_get_tensor(g, "w") == w);
    CHECK(tsr_graph_get_tensor(g, "nope") == nullptr);
}

TEST_CASE("shared subgraphs across several outputs are not duplicated", "[graph]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * x = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 16, 4);
    tsr_tensor * w1 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 16, 16);
    tsr_tensor * w2 = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 16, 16);
    tsr_tensor * h = tsr_rms_norm(ctx, tsr_mul_mat(ctx, w1, x), 1e-6f);  // shared trunk
    tsr_tensor * out1 = tsr_mul_mat(ctx, w2, h);
    tsr_tensor * out2 = tsr_soft_max(ctx, h);
    tsr_tensor * out3 = tsr_add(ctx, out1, out2);

    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, out1));
    const int n1 = tsr_graph_n_nodes(g);
    CHECK(n1 == 3);  // mul_mat, rms_norm, mul_mat
    REQUIRE(tsr_build_forward_expand(g, out2));
    CHECK(tsr_graph_n_nodes(g) == n1 + 1);
    REQUIRE(tsr_build_forward_expand(g, out3));
    CHECK(tsr_graph_n_nodes(g) == n1 + 2);
    CHECK(tsr_graph_n_leafs(g) == 3);
    check_topological(g);
    CHECK(index_of(g, h) < index_of(g, out1));
    CHECK(index_of(g, h) < index_of(g, out2));
    CHECK(index_of(g, out3) == tsr_graph_n_nodes(g) - 1);
}

TEST_CASE("views are nodes, plain tensors and op-less views are leafs, params are nodes", "[graph]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * a = tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 8, 4);
    tsr_tensor * t = tsr_transpose(ctx, a);
    tsr_tensor * r = tsr_reshape_1d(ctx, tsr_cont(ctx, t), 32);
    tsr_tensor * v = tsr_view_1d(ctx, r, 8, 0);
    tsr_tensor * plain = tsr_view_tensor(ctx, a);  // op NONE: a leaf
    tsr_tensor * p = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 8);
    tsr_set_param(p);
    tsr_tensor * out = tsr_add(ctx, tsr_add(ctx, v, tsr_view_1d(ctx, plain, 8, 0)), p);

    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, out));
    check_topological(g);
    CHECK(index_of(g, t) >= 0);
    CHECK(index_of(g, r) >= 0);
    CHECK(index_of(g, v) >= 0);
    CHECK(index_of(g, p) >= 0);      // a param with no op is a node, as ggml
    CHECK(index_of(g, plain) == -1);
    CHECK(tsr_graph_n_leafs(g) == 2);  // a and the plain view
}

TEST_CASE("over capacity: false, an error, and the graph unchanged", "[graph][error]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * y = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * a = tsr_add(ctx, x, y);
    tsr_tensor * b = tsr_mul(ctx, a, y);
    tsr_tensor * c = tsr_sqr(ctx, b);
    tsr_tensor * d = tsr_sqrt(ctx, c);

    tsr_cgraph * g = tsr_new_graph_custom(ctx, 3, false);
    REQUIRE(tsr_build_forward_expand(g, a));
    const std::vector<tsr_tensor *> nodes(g->nodes, g->nodes + g->n_nodes);
    const std::vector<tsr_tensor *> leafs(g->leafs, g->leafs + g->n_leafs);
    tsr_clear_error();
    CHECK_FALSE(tsr_build_forward_expand(g, d));  // needs 4 nodes
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("size 3"));
    CHECK(std::vector<tsr_tensor *>(g->nodes, g->nodes + g->n_nodes) == nodes);
    CHECK(std::vector<tsr_tensor *>(g->leafs, g->leafs + g->n_leafs) == leafs);
    // the visited set was restored too: b and c can still be added (they were visited
    // during the failed call), and a is not added twice
    REQUIRE(tsr_build_forward_expand(g, c));
    CHECK(tsr_graph_n_nodes(g) == 3);
    CHECK(tsr_graph_node(g, 1) == b);
    CHECK(tsr_graph_node(g, 2) == c);
    check_topological(g);

    // leaf capacity
    tsr_cgraph * g2 = tsr_new_graph_custom(ctx, 1, false);
    CHECK_FALSE(tsr_build_forward_expand(g2, a));  // 2 leafs
    CHECK(tsr_graph_n_leafs(g2) == 0);
    CHECK(tsr_graph_n_nodes(g2) == 0);

    tsr_cgraph * g0 = tsr_new_graph_custom(ctx, 0, false);
    REQUIRE(g0);
    CHECK_FALSE(tsr_build_forward_expand(g0, x));
    CHECK_FALSE(tsr_graph_add_node(g0, a));
}

// Regression: the visited set (a hash table of more than 2 * size slots) used to fill up
// before the "graph is full" check, and its probing then spun forever. Each case must
// return false with the sizes in the message, and leave the graph as it was.
TEST_CASE("tiny or full graphs refuse a chain instead of hanging", "[graph][error]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * chain = x;
    for (int i = 0; i < 64; i++) chain = tsr_sqr(ctx, chain);
    for (int size : {0, 1}) {
        INFO("graph size " << size);
        tsr_cgraph * g = tsr_new_graph_custom(ctx, (size_t)size, false);
        REQUIRE(g);
        tsr_clear_error();
        CHECK_FALSE(tsr_build_forward_expand(g, tsr_sqr(ctx, tsr_sqr(ctx, x))));
        CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("is full"));
        CHECK_FALSE(tsr_build_forward_expand(g, chain));
        CHECK(tsr_graph_n_nodes(g) == 0);
        CHECK(tsr_graph_n_leafs(g) == 0);
    }
    // a graph holding as many nodes and leafs as its size, then a deep chain
    tsr_tensor * y = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * z = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_cgraph * g = tsr_new_graph_custom(ctx, 2, false);
    REQUIRE(tsr_build_forward_expand(g, tsr_mul(ctx, tsr_add(ctx, y, z), z)));
    REQUIRE(tsr_graph_n_nodes(g) == 2);
    REQUIRE(tsr_graph_n_leafs(g) == 2);
    tsr_clear_error();
    CHECK_FALSE(tsr_build_forward_expand(g, chain));
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("size 2 is full"));
    CHECK(tsr_graph_n_nodes(g) == 2);
    CHECK(tsr_graph_n_leafs(g) == 2);
    check_topological(g);
}

TEST_CASE("deep chains do not overflow the stack", "[graph]") {
    const int n = 20000;
    tsr::context ctx((size_t)(n + 2) * tsr_tensor_overhead() + tsr_graph_overhead_custom(n, false), nullptr, true);
    tsr_tensor * t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * first = t;
    for (int i = 0; i < n; i++) {
        t = tsr_sqr(ctx, t);
        REQUIRE(t);
    }
    tsr_cgraph * g = tsr_new_graph_custom(ctx, n, false);
    REQUIRE(g);
    REQUIRE(tsr_build_forward_expand(g, t));
    CHECK(tsr_graph_n_nodes(g) == n);
    CHECK(tsr_graph_leaf(g, 0) == first);
    CHECK(tsr_graph_node(g, 0)->src[0] == first);
    CHECK(tsr_graph_node(g, -1) == t);
}

TEST_CASE("wide fan-in stays deduplicated", "[graph]") {
    tsr::context ctx(8 << 20, nullptr, true);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    std::vector<tsr_tensor *> layer;
    for (int i = 0; i < 100; i++) layer.push_back(tsr_scale(ctx, x, (float)i));
    tsr_tensor * acc = layer[0];
    for (int i = 1; i < 100; i++) acc = tsr_add(ctx, acc, layer[(size_t)(i * 37 % 100)]);
    for (int i = 0; i < 100; i++) acc = tsr_add(ctx, acc, layer[(size_t)i]);  // every one reused
    tsr_cgraph * g = tsr_new_graph_custom(ctx, 400, false);
    REQUIRE(tsr_build_forward_expand(g, acc));
    CHECK(tsr_graph_n_nodes(g) == 100 + 99 + 100);
    CHECK(tsr_graph_n_leafs(g) == 1);
    check_topological(g);
}

TEST_CASE("graph views, copies, reset and add_node", "[graph]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * x = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_tensor * a = tsr_sqr(ctx, x);
    tsr_tensor * b = tsr_sqrt(ctx, a);
    tsr_tensor * c = tsr_neg(ctx, b);
    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, c));

    tsr_cgraph v = tsr_graph_view(g, 1, 3);
    CHECK(tsr_graph_n_nodes(&v) == 2);
    CHECK(tsr_graph_n_leafs(&v) == 0);
    CHECK(tsr_graph_node(&v, 0) == b);
    CHECK(tsr_graph_node(&v, -1) == c);
    CHECK_FALSE(tsr_build_forward_expand(&v, x));  // views cannot grow
    tsr_cgraph bad = tsr_graph_view(g, 2, 5);
    CHECK(tsr_graph_n_nodes(&bad) == 0);
    CHECK(std::strlen(tsr_last_error()) > 0);

    tsr_cgraph * g2 = tsr_new_graph_custom(ctx, 3, false);
    REQUIRE(tsr_graph_cpy(g, g2));
    CHECK(tsr_graph_n_nodes(g2) == 3);
    CHECK(tsr_graph_node(g2, 2) == c);
    CHECK(tsr_graph_n_leafs(g2) == 1);
    REQUIRE(tsr_build_forward_expand(g2, c));  // the copy knows what it holds
    CHECK(tsr_graph_n_nodes(g2) == 3);
    tsr_cgraph * small = tsr_new_graph_custom(ctx, 2, false);
    CHECK_FALSE(tsr_graph_cpy(g, small));

    tsr_graph_reset(g2);
    CHECK(tsr_graph_n_nodes(g2) == 0);
    CHECK(tsr_graph_n_leafs(g2) == 0);
    REQUIRE(tsr_graph_add_node(g2, b));
    CHECK(tsr_graph_nodes(g2)[0] == b);
    REQUIRE(tsr_build_forward_expand(g2, c));  // b already in: only c (and x, a) follow
    CHECK(tsr_graph_n_nodes(g2) == 2);
    CHECK(tsr_graph_node(g2, 1) == c);
    CHECK(tsr_graph_size(g2) == 3);
}

TEST_CASE("graph print and dot dump", "[graph]") {
    tsr::context ctx(1 << 20);
    tsr_tensor * x = tsr_set_name(tsr_new_tensor_2d(ctx, TSR_TYPE_F32, 4, 2), "in|put");
    tsr_set_input(x);
    tsr_tensor * y = tsr_set_name(tsr_gelu(ctx, tsr_scale(ctx, x, 2.0f)), "out");
    tsr_set_output(y);
    tsr_cgraph * g = tsr_new_graph(ctx);
    REQUIRE(tsr_build_forward_expand(g, y));

    FILE * f = std::tmpfile();
    REQUIRE(f);
    tsr_graph_print(g, f);
    std::rewind(f);
    std::string text;
    char buf[256];
    while (std::fgets(buf, sizeof(buf), f)) text += buf;
    std::fclose(f);
    CHECK_THAT(text, Catch::Matchers::Contains("n_nodes = 2"));
    CHECK_THAT(text, Catch::Matchers::Contains("GELU"));
    CHECK_THAT(text, Catch::Matchers::Contains("SCALE"));
    CHECK_THAT(text, Catch::Matchers::Contains("n_leafs = 1"));

    const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/tsr_core_test.dot";
    REQUIRE(tsr_graph_dump_dot(g, nullptr, path.c_str()));
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string dot = ss.str();
    std::remove(path.c_str());
    CHECK(dot.rfind("digraph", 0) == 0);
    CHECK_THAT(dot, Catch::Matchers::Contains("in\\|put"));  // record label characters escaped
    CHECK_THAT(dot, Catch::Matchers::Contains("->"));
    CHECK(dot.back() == '\n');
    CHECK_FALSE(tsr_graph_dump_dot(g, nullptr, "/nonexistent-dir/x.dot"));
    CHECK_THAT(std::string(tsr_last_error()), Catch::Matchers::Contains("nonexistent"));
}
