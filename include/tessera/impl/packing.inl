/*
 * packing.inl - the offline packing core behind gallocr (tsr_pack, tsr_pack_lower_bound).
 *
 * The problem (dynamic storage allocation with known lifetimes): n buffers, each live on
 * a half-open step range [lower, upper) with a size; choose offsets so that no two
 * buffers live at one step overlap in memory; minimise the peak (max offset + size).
 *
 * How tessera solves it:
 *  1. Steps are compressed to "sections": the ranges between consecutive distinct
 *     endpoints, or above 1,000 buffers one per distinct start time (two buffers
 *     overlap iff one starts while the other is live, and the load peaks at a start).
 *     The lower bound is the largest sum of sizes live in one section.
 *  2. Greedy placement in several orders (size; size then start; breadth - the
 *     heaviest step a buffer spans; area; duration; start; "peak first" - the buffers
 *     live in the heaviest section, longest first, then the others by size), each
 *     buffer going to the lowest gap that fits among the buffers already placed that
 *     are live at the same time (first fit; it beat best fit on the real traces), or on
 *     top. Small instances then iterate the greedy (the buffers that end above a level
 *     move to the front of the best order: (c) of 3 below) whatever the budget. Large
 *     instances (> 1,000 buffers) start with peak first: the buffers of the
 *     heaviest section then sit without a hole there (each one's first fit is the top
 *     of the stack, so the placer is not even asked), which is what the bound needs.
 *     The conflicting buffers are never enumerated one by one: a segment tree over the
 *     sections keeps, per node, the union of the offset ranges of the buffers stored
 *     there as coalesced runs, so a query merges O(log T) short run lists (a cursor per
 *     list that only moves forward and caches its current run; a blocked list is
 *     climbed while it blocks). An insertion stops climbing the tree at the first
 *     subtree union that already covers it. One order on Y_1 (62,185 buffers) takes
 *     ~90 ms of CPU on a busy 2-core machine.
 *  3. If the best greedy result is above the lower bound and time is left:
 *     - small instances (<= 1,000 buffers): a branch-and-bound search in the spirit of
 *       MiniMalloc (Moffitt, ASPLOS'23): buffers are stacked section by section, always
 *       on the lowest floor, at "canonical" offsets (the floor of every section they
 *       span); the search runs against a target peak, and a branch dies as soon as a
 *       section's floor plus the bytes still to place in it exceeds the target. Where
 *       no unplaced buffer crosses from one section to the next, the two sides are
 *       solved apart (one failing fails the node without retrying the other's choices),
 *       and at the lower bound (no slack) a section's floor counts as the lowest level
 *       any of its unplaced buffers can still take. The lower bound (or the caller's
 *       target above it, tsr_pack_ex) is tried first (node limits that double, with
 *       and without that bound in turn, for 30 % of the budget), then targets descend
 *       from the best packing found (each attempt: a few candidate orders, fixed and
 *       randomised, with a node limit that doubles when the targets run out); between the
 *       two, short restarts at the bound in random orders, plain, then fail first (the
 *       section with the fewest choices, same-range stacks in one order: K packs only
 *       so). The search runs restricted (a heuristic cut, see pk_search::complete);
 *       a target is ruled out only by the complete search. Its budget is counted in work
 *       (pk_clock), not time, so its answer does not depend on the machine's load.
 *     - large instances: (a) the window around the peak (the buffers live within 30,
 *       100, 300 or 10 sections of it, clipped to the window, at most 1,000) is packed
 *       exactly at the lower bound by that same branch and bound; those offsets are
 *       kept and every other buffer is placed around them by the greedy (the holes a
 *       greedy leaves at the peak are what costs on the real traces: PanGu 1.0076 ->
 *       1.0000, ResNet-50 1.0064 -> 1.0000); (b) the remaining greedy orders;
 *       (c) iterated greedy - the buffers that end above a level H move to the front of
 *       the best order and the greedy runs again (H starts at the lower bound and drops
 *       while that does not help); (d) a random walk on the best order (a few buffers
 *       move a short way; kept when the peak does not grow).
 *  The search never returns anything worse than the best greedy packing, and always
 *  stops at the lower bound (nothing can beat it). Define TSR_PACK_DEBUG to trace it on
 *  stderr.
 */

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

TSR_IMPL_NS_BEGIN
namespace {

typedef uint64_t pk_u64;
static const pk_u64 PK_INF = ~(pk_u64) 0;
/* The search's work clock (pk_clock). Its budget is work, not time: a node costs 1 unit
 * plus PK_WORK_PER_SECTION per section it scans, an inference-bound cell PK_WORK_PER_CELL.
 * PK_WORK_PER_MS only names the budget in "ms": it was calibrated on one machine, one
 * core, and is off by about 30 % either way on others.
 * PK_WALL_SLACK: how far the wall clock may run past the budget (a far slower machine). */
static const double PK_WORK_PER_MS = 10000.0;
static const double PK_WORK_PER_CELL = 0.009;
static const double PK_WORK_PER_SECTION = 0.05;
static const double PK_WALL_SLACK = 10.0;

struct pk_timer {
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    double ms() const {
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
};

/* The search's clock: the wall clock, or (per_ms > 0) the work done, counted in nodes
 * and in the cells the inference bound scans, at a rate calibrated on one core. Counting
 * work makes the search's answer a function of its budget alone (on a loaded machine a
 * timed search swung 2 % on MiniMalloc's J from run to run); the wall clock still stops
 * it at PK_WALL_SLACK times the budget, where the machine is far slower than the rate
 * assumes (a 2-core machine shared by six builds ran it at 1/6 of a core). */
struct pk_clock {
    const pk_timer & wall;
    double per_ms = 0;
    double wall_share = 0;
    double work = 0;
    explicit pk_clock(const pk_timer & t) : wall(t) {}
    /* work done in ms, or a share of the wall time once that is further on (so every loop
     * that watches the clock ends once the wall limit is reached) */
    double ms() const { return per_ms > 0 ? std::max(work / per_ms, wall.ms() * wall_share) : wall.ms(); }
    bool expired(double deadline_ms) const { return ms() > deadline_ms; }
};

/* A packing problem over compressed time: buffer i spans sections [l[i], r[i]) with
 * aligned size sz[i] (only buffers with a non-empty range and a non-zero size). */
struct pk_problem {
    int n = 0;
    int T = 0;                 /* number of sections */
    std::vector<int> l, r;
    std::vector<pk_u64> sz;
    std::vector<pk_u64> section_load; /* bytes live in each section */
    std::vector<pk_u64> load;         /* the largest section load over each buffer's range (lazy) */
    pk_u64 lb = 0;
    int peak = 0;                     /* the first section whose load is lb */
};

/* Sorted, disjoint, coalesced [start, end) runs of offsets. Most tree nodes hold one or
 * two runs, so they live inline (no heap allocation); larger sets spill to the heap. */
struct pk_run { pk_u64 first, second; };
struct pk_runs {
    static const uint32_t INL = 2;
    uint32_t n = 0, cap = INL;
    pk_run * heap = nullptr;
    pk_run inl[INL];

    pk_runs() {}
    pk_runs(const pk_runs & o) { *this = o; }
    pk_runs & operator=(const pk_runs & o) {
        if (this == &o) return *this;
        clear();
        reserve(o.n);
        std::copy(o.data(), o.data() + o.n, data());
        n = o.n;
        return *this;
    }
    ~pk_runs() { delete[] heap; }
    pk_run * data() { return heap ? heap : inl; }
    const pk_run * data() const { return heap ? heap : inl; }
    bool empty() const { return n == 0; }
    void clear() { n = 0; }
    void reserve(uint32_t want) {
        if (want <= cap) return;
        uint32_t nc = cap;
        while (nc < want) nc *= 2;
        pk_run * h = new pk_run[nc];
        std::copy(data(), data() + n, h);
        delete[] heap;
        heap = h;
        cap = nc;
    }

    /* index of the first run whose end is > o (n if none) */
    uint32_t first_end_after(pk_u64 o) const {
        const pk_run * v = data();
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
            const uint32_t mid = (lo + hi) / 2;
            if (v[mid].second > o) hi = mid; else lo = mid + 1;
        }
        return lo;
    }
    /* adds [s, e); true when it was already covered (nothing changed) */
    bool insert(pk_u64 s, pk_u64 e) {
        /* runs that touch or overlap [s, e) merge with it */
        uint32_t i = first_end_after(s == 0 ? 0 : s - 1);  /* first run with end >= s */
        pk_run * v = data();
        if (i < n && v[i].first <= s && v[i].second >= e) return true;
        uint32_t j = i;
        pk_u64 ns = s, ne = e;
        while (j < n && v[j].first <= e) {
            ns = std::min(ns, v[j].first);
            ne = std::max(ne, v[j].second);
            j++;
        }
        if (j == i) {
            reserve(n + 1);
            v = data();
            std::copy_backward(v + i, v + n, v + n + 1);
            v[i] = pk_run{s, e};
            n++;
        } else {
            v[i] = pk_run{ns, ne};
            std::copy(v + j, v + n, v + i + 1);
            n -= (j - i - 1);
        }
        return false;
    }
};

/* Greedy placer: buffers are placed one by one (in a given order) at the lowest offset
 * that is free over their whole live range (first fit among the already placed buffers
 * that share a section with them). */
struct pk_placer {
    int P = 1;                       /* leaves (power of two >= T) */
    struct node { pk_runs c, s; };   /* per tree node: canonical cover / subtree union (together: one cache line pair) */
    std::vector<node> N;
    std::vector<int> touched;        /* nodes with non-empty sets (for a fast reset) */
    struct cursor_t { const pk_run * v; uint32_t n, c; pk_u64 s, e; };
    std::vector<cursor_t> cur;

    void reset(int T) {
        int p = 1;
        while (p < T) p <<= 1;
        if (p != P || N.empty()) {
            P = p;
            N.assign((size_t) 2 * P, node());
            touched.clear();
            cur.resize(128);  /* at most two canonical nodes and two ancestors per level */
        } else {
            for (int nd : touched) { N[(size_t) nd].c.clear(); N[(size_t) nd].s.clear(); }
            touched.clear();
        }
    }

    /* the strict ancestors of the canonical nodes of [l, r): nodes on the two boundary
     * paths whose range is not inside [l, r), each once */
    template <class F> void for_ancestors(int l, int r, F f) const {
        int a = l + P, b = r - 1 + P, k = 0;
        while (a >= 1) {
            const int lo_a = (a - (P >> k)) << k, lo_b = (b - (P >> k)) << k, w = 1 << k;
            if (lo_a < l || lo_a + w > r) f(a);
            if (b != a && (lo_b < l || lo_b + w > r)) f(b);
            a >>= 1; b >>= 1; k++;
        }
    }

    /* the run lists that constrain [l, r): the subtree unions of its canonical nodes and
     * the canonical covers of their ancestors, as cursors (first run, cached) in cur[0, m) */
    size_t gather(int l, int r) {
        size_t m = 0;
        auto push = [&](const pk_runs & q) {
            if (q.empty()) return;
            const pk_run * v = q.data();
            cur[m++] = cursor_t{v, q.n, 0, v[0].first, v[0].second};
        };
        for (int a = l + P, b = r + P; a < b; a >>= 1, b >>= 1) {
            if (a & 1) { push(N[(size_t) a].s); a++; }
            if (b & 1) { --b; push(N[(size_t) b].s); }
        }
        for_ancestors(l, r, [&](int nd) { push(N[(size_t) nd].c); });
        return m;
    }

    /* lowest offset where [o, o + size) is free of every gathered run (first fit). Each
     * cursor keeps the first run of its list whose end is > o (o only grows) and a copy of
     * it, so a list that does not block costs no access to its runs. */
    pk_u64 find(int l, int r, pk_u64 size) {
        const size_t m = gather(l, r);
        pk_u64 o = 0;
        size_t k = 0, since = 0;
        while (since < m) {
            cursor_t & q = cur[k];
            if (q.e <= o) {
                /* the cached run ends at or below o: gallop forward, then bisect */
                const uint32_t c = q.c;
                uint32_t step = 1, lo = c + 1, hi = c + 1;
                while (hi < q.n && q.v[hi].second <= o) { lo = hi + 1; hi = c + (step <<= 1); }
                if (hi > q.n) hi = q.n;
                while (lo < hi) {
                    const uint32_t mid = (lo + hi) / 2;
                    if (q.v[mid].second > o) hi = mid; else lo = mid + 1;
                }
                q.c = lo;
                if (lo < q.n) { q.s = q.v[lo].first; q.e = q.v[lo].second; } else q.s = q.e = PK_INF;
            }
            if (q.s < o + size) {
                /* blocked: climb this list while its next run blocks too (cheap, in cache) */
                o = q.e;
                uint32_t c = q.c;
                while (++c < q.n && q.v[c].first < o + size) o = q.v[c].second;
                q.c = c;
                if (c < q.n) { q.s = q.v[c].first; q.e = q.v[c].second; } else q.s = q.e = PK_INF;
                since = 1;
            } else since++;
            if (++k == m) k = 0;
        }
        return o;
    }

    void add(int l, int r, pk_u64 o, pk_u64 size) {
        const pk_u64 e = o + size;
        auto touch = [&](int nd) {
            if (N[(size_t) nd].c.empty() && N[(size_t) nd].s.empty()) touched.push_back(nd);
        };
        for (int a = l + P, b = r + P; a < b; a >>= 1, b >>= 1) {
            if (a & 1) { touch(a); N[(size_t) a].c.insert(o, e); N[(size_t) a].s.insert(o, e); a++; }
            if (b & 1) { --b; touch(b); N[(size_t) b].c.insert(o, e); N[(size_t) b].s.insert(o, e); }
        }
        /* the strict ancestors (as in for_ancestors), path by path: a subtree union holds
         * its children's, so once one already covers [o, e) every node above it does too */
        int a = l + P, b = r - 1 + P, k = 0;
        bool done_a = false, done_b = false;
        while (a >= 1 && !(done_a && done_b)) {
            const int lo_a = (a - (P >> k)) << k, lo_b = (b - (P >> k)) << k, w = 1 << k;
            if (b == a) done_a = done_b = done_a || done_b;
            if (!done_a && (lo_a < l || lo_a + w > r)) { touch(a); done_a = N[(size_t) a].s.insert(o, e); }
            if (b != a && !done_b && (lo_b < l || lo_b + w > r)) { touch(b); done_b = N[(size_t) b].s.insert(o, e); }
            if (b == a) done_b = done_a;
            a >>= 1; b >>= 1; k++;
        }
    }
};

/* Place buffers in `order` (a permutation of all of them); returns the peak and fills
 * off. The first `fixed` buffers of the order keep the offsets already in off. */
static inline pk_u64 pk_greedy(const pk_problem & P, const std::vector<int> & order, std::vector<pk_u64> & off,
                               pk_placer & pl, size_t fixed = 0) {
    pl.reset(P.T);
    off.resize((size_t) P.n);
    pk_u64 peak = 0;
    bool stacking = fixed == 0;  /* every buffer so far is live in the peak section: they sit contiguously from 0 */
    for (size_t k = 0; k < order.size(); k++) {
        const size_t i = (size_t) order[k];
        pk_u64 o = off[i];
        if (k >= fixed) {
            stacking = stacking && P.l[i] <= P.peak && P.peak < P.r[i];
            /* while stacking, the first fit is the top of the stack (every placed buffer overlaps this one) */
            o = stacking ? peak : pl.find(P.l[i], P.r[i], P.sz[i]);
            off[i] = o;
        }
        pl.add(P.l[i], P.r[i], o, P.sz[i]);
        peak = std::max(peak, o + P.sz[i]);
    }
    return peak;
}

/* ---- branch and bound over canonical section-by-section packings ---------------------- */

struct pk_search {
    const pk_problem & P;
    pk_u64 cap = 0;
    std::vector<pk_u64> floor_, rem;
    std::vector<char> real_;                /* per section: its floor is the top of a placed buffer (or 0), not a hole's */
    std::vector<int> under;                 /* per section: the buffer whose top is its floor (-1: 0 or a hole) */
    std::vector<int> rank;                  /* per buffer: its place in the candidate order */
    std::vector<std::vector<int>> by_sec;   /* unplaced candidates per section, preference order */
    std::vector<char> placed;
    std::vector<pk_u64> off;
    double deadline_ms = 0;
    long node_limit = 0, nodes = 0;
    bool stop = false;
    pk_clock & clock;

    pk_search(const pk_problem & p, pk_clock & c) : P(p), clock(c) {}

    void init(pk_u64 capacity, int variant) {
        cap = capacity;
        floor_.assign((size_t) P.T, 0);
        real_.assign((size_t) P.T, 1);
        under.assign((size_t) P.T, -1);
        rem.assign((size_t) P.T, 0);
        by_sec.assign((size_t) P.T, std::vector<int>());
        placed.assign((size_t) P.n, 0);
        off.assign((size_t) P.n, 0);
        std::vector<int> ord((size_t) P.n);
        std::iota(ord.begin(), ord.end(), 0);
        if (variant >= 3) {
            /* a random perturbation of size (even variants) or duration x size (odd), seeded by variant */
            uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t) (variant + 1);
            std::vector<double> key((size_t) P.n);
            for (int i = 0; i < P.n; i++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                const double u = (double) (x >> 11) / 9007199254740992.0;
                const double dur = (double) (P.r[(size_t) i] - P.l[(size_t) i]);
                key[(size_t) i] = (variant & 1 ? dur : 1.0) * (double) P.sz[(size_t) i] * (0.5 + u);
            }
            std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) { return key[(size_t) a] > key[(size_t) b]; });
        } else {
            std::stable_sort(ord.begin(), ord.end(), [&](int a, int b) {
                const int da = P.r[(size_t) a] - P.l[(size_t) a], db = P.r[(size_t) b] - P.l[(size_t) b];
                const pk_u64 sa = P.sz[(size_t) a], sb = P.sz[(size_t) b];
                switch (variant % 3) {
                    case 0:  if (da != db) return da > db; return sa > sb;
                    case 1:  if (sa != sb) return sa > sb; return da > db;
                    default: { const double aa = (double) sa * da, ab = (double) sb * db; if (aa != ab) return aa > ab; return sa > sb; }
                }
            });
        }
        rank.resize((size_t) P.n);
        for (int k = 0; k < P.n; k++) rank[(size_t) ord[(size_t) k]] = k;
        for (int i : ord) {
            for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) {
                by_sec[(size_t) s].push_back(i);
                rem[(size_t) s] += P.sz[(size_t) i];
            }
        }
        cross.assign((size_t) P.T, 0);
        for (int i = 0; i < P.n; i++) for (int s = P.l[(size_t) i]; s + 1 < P.r[(size_t) i]; s++) cross[(size_t) s]++;
        nodes = 0;
        stop = false;
    }

    /* ---- the state changes, undone in reverse from a trail ---- */
    struct change { int what; pk_u64 old; char old_real; int old_under; };  /* what >= 0: a section's floor; -1 - i: buffer i placed */
    std::vector<change> trail;
    std::vector<int> cross;                    /* per section s: unplaced buffers live in s and s + 1 */

    void set_floor(int s, pk_u64 v, bool is_real, int below = -1) {
        trail.push_back(change{s, floor_[(size_t) s], real_[(size_t) s], under[(size_t) s]});
        under[(size_t) s] = below;
        floor_[(size_t) s] = v;
        real_[(size_t) s] = is_real;
    }
    void place(int i, pk_u64 f) {
        const pk_u64 top = f + P.sz[(size_t) i];
        for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) {
            set_floor(s, top, true, i);
            rem[(size_t) s] -= P.sz[(size_t) i];
        }
        for (int s = P.l[(size_t) i]; s + 1 < P.r[(size_t) i]; s++) cross[(size_t) s]--;
        placed[(size_t) i] = 1;
        off[(size_t) i] = f;
        trail.push_back(change{-1 - i, 0, 0, -1});
    }
    void undo(size_t mark) {
        while (trail.size() > mark) {
            const change c = trail.back();
            trail.pop_back();
            if (c.what >= 0) { floor_[(size_t) c.what] = c.old; real_[(size_t) c.what] = c.old_real; under[(size_t) c.what] = c.old_under; continue; }
            const int i = -1 - c.what;
            placed[(size_t) i] = 0;
            for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) rem[(size_t) s] += P.sz[(size_t) i];
            for (int s = P.l[(size_t) i]; s + 1 < P.r[(size_t) i]; s++) cross[(size_t) s]++;
        }
    }

    /* Inference (MiniMalloc's section bound, sharpened): floors only rise and a buffer sits
     * on the floor of every section it spans, so unplaced buffer i goes no lower than the
     * highest floor over its range, and a section's bytes still to place stack no lower
     * than the least of those among its buffers. Worth it when the target leaves no slack
     * (the lower bound). A pass over every unplaced buffer's range per node made it ~10x
     * dearer than a plain node; both range operations can go through power-of-two blocks
     * instead (a sparse table of floor maxima; a range minimum set on two blocks and
     * pushed down), O(W log W + n) for W sections: on MiniMalloc's I a node at the bound
     * costs 2.4x less CPU (the same nodes, the same answers). */
    bool infer = false;
    /* complete: the search covers every packing in normal form (each buffer resting on
     * a placed one or on 0). Restricted (false), a section left empty at its floor rises
     * past the buffers that could have sat there: a heuristic cut that loses packings
     * (rarely: 12 of 5,000 tiny random instances lost their optimum) but finds the fit
     * of MiniMalloc's A and E in ~0.1 s where the complete search needs more than 1 s. */
    bool complete = false;
    /* fail_first: branch on the section at the lowest floor with the fewest choices rather
     * than the first one, and search each stack of same-range buffers in one order only
     * (fewest_choices, stacked_out_of_order). Used by the second family of restarts at the
     * bound: of 150 random orders (seeds 2000, 2002, ...) at 3,000 nodes, 12 pack
     * MiniMalloc's K with it and none without it; of 150 (seeds 1000, 1001, ...) at 2,048
     * nodes, 15 against 7 pack H, but 1 against 3 pack I, so it is a family of its own,
     * after the plain restarts rather than instead of them. */
    bool fail_first = false;
    struct span_of { int a, b, k; pk_u64 m; };  /* a buffer's sections relative to lo, log2 of their count, its level */
    std::vector<span_of> spans;                 /* scratch: the unplaced buffers inside [lo, hi) */
    std::vector<pk_u64> table;                  /* scratch: W x log W blocks, level k at [k * W, (k + 1) * W) */

    static int pk_log2(int x) { int k = 0; while ((2 << k) <= x) k++; return k; }

    /* per section s of [lo, hi): the lowest level an unplaced buffer inside [lo, hi) that
     * spans s can still take (PK_INF where none), at table[s - lo] */
    void lowest_levels(int lo, int hi) {
        const int W = hi - lo, K = pk_log2(W) + 1;
        spans.clear();
        size_t covered = 0;
        for (int i = 0; i < P.n; i++) {
            if (placed[(size_t) i] || P.l[(size_t) i] < lo || P.r[(size_t) i] > hi) continue;
            const int a = P.l[(size_t) i] - lo, b = P.r[(size_t) i] - lo;
            spans.push_back(span_of{a, b, pk_log2(b - a), 0});
            covered += (size_t) (b - a);
        }
        table.resize((size_t) W * (size_t) K);
        clock.work += PK_WORK_PER_CELL * (double) (std::min(covered, (size_t) W * (size_t) K) + spans.size());
        /* deep in the search few buffers are left: a pass over their ranges is cheaper */
        if (covered <= (size_t) W * (size_t) K) lowest_by_ranges(lo, W);
        else lowest_by_blocks(lo, W, K);
    }
    void lowest_by_ranges(int lo, int W) {
        std::fill(table.begin(), table.begin() + W, PK_INF);
        for (const span_of & v : spans) {
            pk_u64 m = 0;
            for (int s = v.a; s < v.b; s++) m = std::max(m, floor_[(size_t) (lo + s)]);
            for (int s = v.a; s < v.b; s++) table[(size_t) s] = std::min(table[(size_t) s], m);
        }
    }
    void lowest_by_blocks(int lo, int W, int K) {
        pk_u64 * t = table.data();
        for (int s = 0; s < W; s++) t[s] = floor_[(size_t) (lo + s)];
        for (int k = 1; k < K; k++) {
            const pk_u64 * prev = t + (size_t) (k - 1) * W;
            pk_u64 * cur = t + (size_t) k * W;
            for (int s = 0; s + (1 << k) <= W; s++) cur[s] = std::max(prev[s], prev[s + (1 << (k - 1))]);
        }
        /* each level from two blocks that cover its range; then the table is reused for
         * the minima, set on the same blocks and pushed down a level at a time */
        for (span_of & v : spans) v.m = std::max(t[(size_t) v.k * W + v.a], t[(size_t) v.k * W + v.b - (1 << v.k)]);
        std::fill(table.begin(), table.end(), PK_INF);
        for (const span_of & v : spans) {
            pk_u64 * row = t + (size_t) v.k * W;
            row[v.a] = std::min(row[v.a], v.m);
            row[v.b - (1 << v.k)] = std::min(row[v.b - (1 << v.k)], v.m);
        }
        for (int k = K - 1; k > 0; k--) {
            const pk_u64 * row = t + (size_t) k * W;
            pk_u64 * below = t + (size_t) (k - 1) * W;
            for (int s = 0; s + (1 << k) <= W; s++) {
                below[s] = std::min(below[s], row[s]);
                below[s + (1 << (k - 1))] = std::min(below[s + (1 << (k - 1))], row[s]);
            }
        }
    }

    /* Independent parts of sections [lo, hi): runs of sections with bytes still to place,
     * cut where no unplaced buffer crosses from one section to the next. What is placed in
     * one part cannot change what fits in another, so a part that fails fails them all:
     * no other choice made in the others is tried again for it (MiniMalloc's dynamic
     * decomposition). Returns the number of parts (their ranges in parts, the first `max`),
     * or -1 when the inference bound shows no packing under cap. */
    int split(int lo, int hi, std::pair<int, int> * parts, int max) {
        if (infer) {
            lowest_levels(lo, hi);
            for (int s = lo; s < hi; s++) {
                if (rem[(size_t) s] != 0 && table[(size_t) (s - lo)] + rem[(size_t) s] > cap) return -1;
            }
        }
        int np = 0, open = -1;
        for (int s = lo; s < hi; s++) {
            if (open < 0 && rem[(size_t) s] != 0) open = s;
            if (open >= 0 && (s + 1 == hi || cross[(size_t) s] == 0)) { if (np < max) parts[np] = {open, s + 1}; np++; open = -1; }
        }
        return np;
    }

    /* the largest floor + bytes still to place over sections [a, b): the tightest part */
    pk_u64 fullest(int a, int b) const {
        pk_u64 m = 0;
        for (int s = a; s < b; s++) if (rem[(size_t) s] != 0) m = std::max(m, floor_[(size_t) s] + rem[(size_t) s]);
        return m;
    }

    /* The lowest level an unplaced buffer of section sb can take once nothing sits on
     * its floor f there; [ra, rb): the run of sections around sb whose floor is f. A
     * buffer that reaches outside the run goes no lower than the highest floor over its
     * range. One inside the run (it could have sat on f) can still sit above f on a
     * buffer placed later at f beside sb, so it goes no lower than f plus the smallest
     * other unplaced buffer of the run: leaving it out lifted the section past packings
     * that exist (a tiny instance with a packing at 15 was searched as impossible). */
    pk_u64 hole_level(int sb, int ra, int rb, pk_u64 f) const {
        pk_u64 level = PK_INF;
        bool run_candidate = false;
        for (int i : by_sec[(size_t) sb]) {
            if (placed[(size_t) i]) continue;
            if (P.l[(size_t) i] >= ra && P.r[(size_t) i] <= rb) { run_candidate = true; continue; }
            pk_u64 m = 0;
            for (int s2 = P.l[(size_t) i]; s2 < P.r[(size_t) i] && m < level; s2++) m = std::max(m, floor_[(size_t) s2]);
            level = std::min(level, m);
        }
        if (run_candidate && complete) {
            const pk_u64 z = smallest_of_two_in(ra, rb);
            if (z != PK_INF) level = std::min(level, f + z);
        }
        return level;
    }
    /* the smallest size among the unplaced buffers live in sections [ra, rb), PK_INF
     * with fewer than two (a buffer alone there has nothing to sit on but the floor) */
    pk_u64 smallest_of_two_in(int ra, int rb) const {
        pk_u64 smallest = PK_INF;
        int count = 0;
        for (int s = ra; s < rb; s++) {
            for (int i : by_sec[(size_t) s]) {
                if (placed[(size_t) i] || (P.l[(size_t) i] < s && s != ra)) continue;  /* each buffer once: at its first section in the run */
                smallest = std::min(smallest, P.sz[(size_t) i]);
                count++;
            }
        }
        return count >= 2 ? smallest : PK_INF;
    }

    /* Whether buffer i, sitting on the floor of its sections, rests on a placed buffer (or
     * on 0) in one of them. One resting only on holes could slide down into them: that
     * packing is found where the holes are not left, so this branch is not needed
     * (every packing slides down to one where each buffer rests on something). */
    bool supported(int i) const {
        if (!complete) return true;
        for (int s = P.l[(size_t) i]; s < P.r[(size_t) i]; s++) if (real_[(size_t) s]) return true;
        return false;
    }

    /* ---- the search itself: a depth-first walk over an explicit stack of frames ----
     * Each node of the search places one buffer or leaves one hole, so the walk can go
     * as deep as there are placements and holes. The nodes live on the heap (frames,
     * with their parts and candidates in pools that grow and shrink with them), not on
     * the call stack: a recursion per node overflowed the stack of a sanitized build on
     * MiniMalloc's K, and the depth limit that stopped it also stopped J short of its fit. */
    struct frame {
        int lo, hi;        /* the sections this node packs */
        bool parts;        /* independent parts solved in turn; else the choices at the lowest floor */
        int next, count;   /* the next part or candidate to try; how many there are */
        size_t first;      /* where its parts / candidates start in part_pool / cand_pool */
        size_t mark;       /* the trail's size on entry: what a failure undoes back to */
        int sb, ra, rb;    /* choices: the section with the lowest floor, the run of sections at that floor */
        pk_u64 f;          /* choices: that floor */
    };
    std::vector<frame> frames;
    std::vector<std::pair<int, int>> part_pool;
    std::vector<int> cand_pool;
    enum step_t { NODE_FAILS, NODE_DONE, FRAME_PUSHED, CALL_CHILD };
    int child_lo = 0, child_hi = 0;  /* the sections of the child node a CALL_CHILD asks for */

    /* Opens the node that packs sections [lo, hi): its answer when known at once
     * (NODE_FAILS / NODE_DONE), or FRAME_PUSHED with the frame that tries its choices. */
    step_t open_node(int lo, int hi) {
        clock.work += 1 + PK_WORK_PER_SECTION * (double) (hi - lo);
        if ((++nodes & 255) == 0 && (clock.expired(deadline_ms) || nodes > node_limit)) stop = true;
        if (stop) return NODE_FAILS;
        std::pair<int, int> parts[16];
        const int np = split(lo, hi, parts, 16);
        if (np < 0) return NODE_FAILS;  /* the inference bound */
        if (np == 0) return NODE_DONE;
        if (np > 1 && np <= 16) {
            /* the tightest part first: it is the likeliest to fail */
            std::sort(parts, parts + np, [&](const std::pair<int, int> & x, const std::pair<int, int> & y) {
                return fullest(x.first, x.second) > fullest(y.first, y.second);
            });
            frames.push_back(frame{lo, hi, true, 0, np, part_pool.size(), trail.size(), -1, 0, 0, 0});
            part_pool.insert(part_pool.end(), parts, parts + np);
            return FRAME_PUSHED;
        }
        if (np == 1) { lo = parts[0].first; hi = parts[0].second; }
        return open_choices(lo, hi);
    }

    /* The choices at the lowest floor f of [lo, hi) (section sb): each distinct unplaced
     * buffer that can sit on f there, then a hole. */
    step_t open_choices(int lo, int hi) {
        int sb = -1;
        pk_u64 f = PK_INF;
        for (int s = lo; s < hi; s++) {
            if (rem[(size_t) s] != 0 && floor_[(size_t) s] < f) { f = floor_[(size_t) s]; sb = s; }
        }
        if (sb < 0) return NODE_DONE;
        if (fail_first) sb = fewest_choices(lo, hi, f);
        clock.work += PK_WORK_PER_SECTION * (double) by_sec[(size_t) sb].size();
        /* the run of sections around sb whose floor is exactly f: a buffer can sit on f
         * iff its whole range lies inside it */
        int ra = sb, rb = sb + 1;
        while (ra > 0 && floor_[(size_t) ra - 1] == f) ra--;
        while (rb < P.T && floor_[(size_t) rb] == f) rb++;
        const size_t first = cand_pool.size();
        for (int i : by_sec[(size_t) sb]) {
            if (placed[(size_t) i] || P.l[(size_t) i] < ra || P.r[(size_t) i] > rb || !supported(i)) continue;
            if (fail_first && stacked_out_of_order(i)) continue;
            if (cand_pool.size() - first < 64 && !same_as_a_candidate(i, first)) cand_pool.push_back(i);
        }
        frames.push_back(frame{lo, hi, false, 0, (int) (cand_pool.size() - first), first, trail.size(), sb, ra, rb, f});
        return FRAME_PUSHED;
    }
    /* Buffer i would sit directly on a buffer with the same range that comes later in the
     * candidate order. A stack of buffers with one range can be reordered freely (they
     * cover the same sections), so only its order by rank is searched: MiniMalloc's K has
     * 57 such groups (149 of its 454 buffers, up to 15 in one), each searched k! times
     * over without this. */
    bool stacked_out_of_order(int i) const {
        const int y = under[(size_t) P.l[(size_t) i]];
        return y >= 0 && rank[(size_t) y] > rank[(size_t) i] && P.l[(size_t) y] == P.l[(size_t) i] && P.r[(size_t) y] == P.r[(size_t) i];
    }

    /* Of the sections of [lo, hi) at the lowest floor f, the one with the fewest choices
     * (its candidates, plus a hole where it has slack): any of them is a valid section to
     * branch on, and a section with one choice left is a forced move, with none a failure
     * found now rather than after a subtree (fail first). Candidates are counted without
     * the duplicate and support filters: a cheap estimate is enough to rank sections. */
    int fewest_choices(int lo, int hi, pk_u64 f) {
        int best = -1, best_n = INT32_MAX;
        for (int a = lo; a < hi;) {
            if (floor_[(size_t) a] != f) { a++; continue; }
            int b = a;
            while (b < hi && floor_[(size_t) b] == f) b++;
            /* a buffer can sit on f iff its range lies inside the run of floor f */
            int ra = a, rb = b;
            while (ra > 0 && floor_[(size_t) ra - 1] == f) ra--;
            while (rb < P.T && floor_[(size_t) rb] == f) rb++;
            for (int s = a; s < b; s++) {
                if (rem[(size_t) s] == 0) continue;
                clock.work += PK_WORK_PER_SECTION * (double) by_sec[(size_t) s].size();
                int n = f + rem[(size_t) s] < cap ? 1 : 0;
                for (int i : by_sec[(size_t) s]) {
                    if (placed[(size_t) i] || P.l[(size_t) i] < ra || P.r[(size_t) i] > rb) continue;
                    if (++n >= best_n) break;
                }
                if (n < best_n) { best_n = n; best = s; }
                if (n <= 1) return best;
            }
            a = b;
        }
        return best;
    }
    /* a buffer with the range and size of one already a candidate leads to the same packings */
    bool same_as_a_candidate(int i, size_t first) const {
        for (size_t k = first; k < cand_pool.size(); k++) {
            const int c = cand_pool[k];
            if (P.l[(size_t) c] == P.l[(size_t) i] && P.r[(size_t) c] == P.r[(size_t) i] && P.sz[(size_t) c] == P.sz[(size_t) i]) return true;
        }
        return false;
    }

    step_t close_frame(step_t answer) {
        const frame & fr = frames.back();
        if (fr.parts) part_pool.resize(fr.first); else cand_pool.resize(fr.first);
        frames.pop_back();
        return answer;
    }
    step_t call_child(int lo, int hi) { child_lo = lo; child_hi = hi; return CALL_CHILD; }

    /* The top frame after its last child answered `child` (FRAME_PUSHED: it has had none
     * yet): the next child to open (CALL_CHILD), or its own answer (the frame closed). A
     * child that packs its sections packs the node's (the placements stay); a part that
     * fails fails the node (the other parts' choices are not retried for it). */
    step_t resume(step_t child) {
        frame & fr = frames.back();
        if (child == NODE_DONE && (!fr.parts || fr.next == fr.count)) return close_frame(NODE_DONE);
        if (fr.parts) {
            if (child == NODE_FAILS) { undo(fr.mark); return close_frame(NODE_FAILS); }
            const std::pair<int, int> part = part_pool[fr.first + (size_t) fr.next++];
            return call_child(part.first, part.second);
        }
        if (child == NODE_FAILS) {
            undo(fr.mark);
            if (stop) return close_frame(NODE_FAILS);
        }
        if (fr.next < fr.count) {
            place(cand_pool[fr.first + (size_t) fr.next++], fr.f);
            return call_child(fr.lo, fr.hi);
        }
        if (fr.next++ == fr.count) {
            /* leave a hole: nothing of this section sits on its current floor; it rises to
             * the lowest level another of its buffers can sit on */
            const pk_u64 next_level = hole_level(fr.sb, fr.ra, fr.rb, fr.f);
            if (next_level != PK_INF && next_level + rem[(size_t) fr.sb] <= cap) {
                set_floor(fr.sb, next_level, false);
                return call_child(fr.lo, fr.hi);
            }
        }
        return close_frame(NODE_FAILS);
    }

    /* Place every unplaced buffer within sections [lo, hi) under cap; true when done
     * (the placements stay), false with the state as it was. */
    bool solve(int lo, int hi) {
        frames.clear();
        part_pool.clear();
        cand_pool.clear();
        step_t s = open_node(lo, hi);
        for (;;) {
            if (s == CALL_CHILD) s = open_node(child_lo, child_hi);
            else if (s == FRAME_PUSHED) s = resume(FRAME_PUSHED);
            else if (frames.empty()) return s == NODE_DONE;
            else s = resume(s);
        }
    }

    /* true when a packing with peak <= capacity was found (in off) */
    bool run(pk_u64 capacity, int variant, double deadline, long limit) {
        init(capacity, variant);
        for (int s = 0; s < P.T; s++) if (rem[(size_t) s] > cap) return false;
        deadline_ms = deadline;
        node_limit = limit;
        trail.clear();
        return solve(0, P.T);
    }
};

static inline pk_u64 pk_align_up(pk_u64 x, pk_u64 a) { return (x + a - 1) / a * a; }

/* The window around the peak: the buffers live in sections [peak - half, peak + half],
 * clipped to it, packed exactly at the lower bound by the branch and bound (the peak is
 * where a greedy leaves the holes that cost; the window is small enough to solve). On
 * success `win` lists them and win_off their offsets. */
static inline bool pk_window(const pk_problem & P, int half, const pk_timer & timer, double deadline,
                             std::vector<int> & win, std::vector<pk_u64> & win_off) {
    const int wa = std::max(0, P.peak - half), wb = std::min(P.T, P.peak + half + 1);
    pk_problem W;
    win.clear();
    for (int i = 0; i < P.n; i++) {
        if (P.l[(size_t) i] >= wb || P.r[(size_t) i] <= wa) continue;
        win.push_back(i);
        W.l.push_back(std::max(P.l[(size_t) i], wa) - wa);
        W.r.push_back(std::min(P.r[(size_t) i], wb) - wa);
        W.sz.push_back(P.sz[(size_t) i]);
        if (win.size() > 1000) return false;  /* a small instance, as the search is sized for */
    }
    W.n = (int) win.size();
    W.T = wb - wa;
    W.lb = P.lb;
    pk_clock wall(timer);
    pk_search srch(W, wall);
    for (int v = 0; v < 6 && timer.ms() < deadline; v++) {
        const bool ok = srch.run(P.lb, v, deadline, 20000);
#ifdef TSR_PACK_DEBUG
        fprintf(stderr, "  window +-%d (%d buffers, %d sections) variant %d: %s after %ld nodes, %.1f ms\n", half, W.n, W.T, v, ok ? "packed" : "no", srch.nodes, timer.ms());
#endif
        if (ok) { win_off = srch.off; return true; }
    }
    return false;
}



/* The heaviest section each buffer spans (a sparse table of range maxima), for the
 * breadth orders; computed on first use. */
static inline void pk_compute_load(pk_problem & P) {
    if (!P.load.empty() || P.n == 0) return;
    std::vector<std::vector<pk_u64>> st(1, P.section_load);
    for (int k = 1; (1 << k) <= P.T; k++) {
        const std::vector<pk_u64> & prev = st.back();
        std::vector<pk_u64> nx((size_t) (P.T - (1 << k) + 1));
        for (size_t i = 0; i < nx.size(); i++) nx[i] = std::max(prev[i], prev[i + ((size_t) 1 << (k - 1))]);
        st.push_back(std::move(nx));
    }
    P.load.resize((size_t) P.n);
    for (int i = 0; i < P.n; i++) {
        const int a = P.l[(size_t) i], b = P.r[(size_t) i];
        int k = 0;
        while ((2 << k) <= b - a) k++;
        P.load[(size_t) i] = std::max(st[(size_t) k][(size_t) a], st[(size_t) k][(size_t) (b - (1 << k))]);
    }
}

/* The orders the greedy tries, as sort keys (ascending; ~x sorts x descending; ties go
 * by index, so the order is deterministic). Orders 4 and 5 need pk_compute_load. */
struct pk_key { pk_u64 k[4]; int i; };
static inline pk_key pk_order_key(const pk_problem & P, int variant, int i) {
    const size_t u = (size_t) i;
    const pk_u64 sz = P.sz[u], l = (pk_u64) P.l[u], d = (pk_u64) (P.r[u] - P.l[u]);
    switch (variant) {
        case 0: return pk_key{{~sz, ~d, l, 0}, i};                  /* size, then duration, then start */
        case 1: return pk_key{{~sz, l, ~d, 0}, i};                  /* size, then start */
        case 2: {                                                   /* area */
            const double area = (double) sz * (double) d;
            pk_u64 bits;
            std::memcpy(&bits, &area, sizeof bits);  /* positive doubles order like their bits */
            return pk_key{{~bits, ~sz, 0, 0}, i};
        }
        case 3: return pk_key{{~d, ~sz, 0, 0}, i};                  /* duration */
        case 4: return pk_key{{~P.load[u], ~d, ~sz, 0}, i};         /* the heaviest step it spans (breadth), then duration */
        case 5: return pk_key{{~P.load[u], ~sz, ~d, 0}, i};         /* breadth, then size */
        case 7: {
            /* peak first: the buffers live in the heaviest section, longest first (they stack
             * there without a hole, long-lived ones at the bottom), then the others by size,
             * then start */
            if (P.l[u] <= P.peak && P.peak < P.r[u]) return pk_key{{0, ~d, ~sz, l}, i};
            return pk_key{{1, ~sz, l, ~d}, i};
        }
        default: return pk_key{{l, ~sz, 0, 0}, i};                  /* start */
    }
}
static inline void pk_sort_order(const pk_problem & P, int variant, std::vector<int> & order, std::vector<pk_key> & keys) {
    keys.resize((size_t) P.n);
    for (int i = 0; i < P.n; i++) keys[(size_t) i] = pk_order_key(P, variant, i);
    std::sort(keys.begin(), keys.end(), [](const pk_key & a, const pk_key & b) {
        for (int t = 0; t < 4; t++) if (a.k[t] != b.k[t]) return a.k[t] < b.k[t];
        return a.i < b.i;
    });
    order.resize((size_t) P.n);
    for (int i = 0; i < P.n; i++) order[(size_t) i] = keys[(size_t) i].i;
}
static const int PK_N_ORDERS = 8;
/* the search's random orders: seeds 3, 4, ... for its attempts, PK_DIVE_SEEDS, ... for its
 * restarts (the first family tried; see pk_packer::dive_at_bound) */
static const int PK_DIVE_SEEDS = 1000;

/* Sorts (time, code) events by time (the order among equal times does not matter): a
 * radix sort on (time - min) << 32 | code when the times span less than 2^32 steps, else
 * a comparison sort. */
static inline void pk_sort_events(std::vector<std::pair<int64_t, uint32_t>> & ev) {
    if (ev.empty()) return;
    int64_t lo = ev[0].first, hi = ev[0].first;
    for (const auto & e : ev) { lo = std::min(lo, e.first); hi = std::max(hi, e.first); }
    const uint64_t span = (uint64_t) hi - (uint64_t) lo;
    if (span >= ((uint64_t) 1 << 32) || ev.size() < 256) { std::sort(ev.begin(), ev.end()); return; }
    std::vector<pk_u64> a(ev.size()), b(ev.size());
    for (size_t k = 0; k < ev.size(); k++) a[k] = (((pk_u64) ev[k].first - (pk_u64) lo) << 32) | ev[k].second;
    int bits = 0;
    while (bits < 32 && (span >> bits) != 0) bits++;
    for (int sh = 32; sh < 32 + bits; sh += 11) {
        size_t cnt[2049] = {0};
        for (pk_u64 x : a) cnt[((x >> sh) & 2047) + 1]++;
        for (int d = 0; d < 2048; d++) cnt[d + 1] += cnt[d];
        for (pk_u64 x : a) b[cnt[(x >> sh) & 2047]++] = x;
        a.swap(b);
    }
    for (size_t k = 0; k < ev.size(); k++) ev[k] = std::make_pair((int64_t) ((pk_u64) lo + (a[k] >> 32)), (uint32_t) a[k]);
}



} // namespace
TSR_IMPL_NS_END

TSR_IMPL_NS_BEGIN
namespace {
/* The bodies of tsr_pack_lower_bound / tsr_pack; they may throw std::bad_alloc, which the
 * API wrappers below turn into an error. */
static size_t pk_lower_bound_body(const struct tsr_pack_item * items, size_t n, size_t alignment) {
    if (alignment == 0) alignment = 1;
    if (n == 0) return 0;
    if (!items) { tsr_set_error("tsr_pack_lower_bound: items is NULL with n = %zu", n); return SIZE_MAX; }
    std::vector<std::pair<int64_t, int64_t>> ev;  /* (time, +size / -size) */
    ev.reserve(2 * n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].upper <= items[i].lower || items[i].size == 0) continue;
        const int64_t s = (int64_t) pk_align_up(items[i].size, alignment);
        ev.emplace_back(items[i].lower, s);
        ev.emplace_back(items[i].upper, -s);
    }
    std::sort(ev.begin(), ev.end(), [](const std::pair<int64_t, int64_t> & a, const std::pair<int64_t, int64_t> & b) {
        if (a.first != b.first) return a.first < b.first;
        return a.second < b.second;  /* frees before allocations at the same time */
    });
    int64_t cur = 0, best = 0;
    for (auto & e : ev) { cur += e.second; best = std::max(best, cur); }
    return (size_t) best;
}

/* tsr_pack, setup: sections from the sorted (time, 2 * problem index + is_upper) events.
 * Two buffers overlap iff one starts while the other is live, so for large instances
 * the sections are the distinct start times only (a buffer covers the starts in
 * [lower, upper)): fewer sections, a faster greedy. Small ones keep every endpoint
 * (the branch and bound's floors work better on the finer grid). */
static void pk_rank_sections(const std::vector<std::pair<int64_t, uint32_t>> & ev, pk_problem & P) {
    const bool starts_only = P.l.size() > 1000;  /* more than 1,000 buffers */
    int rank = 0;  /* distinct (start) times before the current time */
    for (size_t e = 0; e < ev.size();) {
        size_t g = e;
        bool any_start = false;
        for (; g < ev.size() && ev[g].first == ev[e].first; g++) {
            (ev[g].second & 1 ? P.r : P.l)[ev[g].second >> 1] = rank;
            any_start |= (ev[g].second & 1) == 0;
        }
        if (any_start || !starts_only) rank++;
        e = g;
    }
    P.T = starts_only ? rank : std::max(0, rank - 1);
}

/* tsr_pack, setup: the bytes live in each section, the lower bound (the most) and the
 * first section that reaches it. */
static void pk_section_loads(pk_problem & P) {
    std::vector<pk_u64> d((size_t) P.T + 1, 0);
    for (int i = 0; i < P.n; i++) { d[(size_t) P.l[(size_t) i]] += P.sz[(size_t) i]; d[(size_t) P.r[(size_t) i]] -= P.sz[(size_t) i]; }
    pk_u64 cur = 0;
    for (int s = 0; s < P.T; s++) {
        cur += d[(size_t) s];
        if (cur > P.lb) { P.lb = cur; P.peak = s; }
        d[(size_t) s] = cur;
    }
    P.section_load.assign(d.begin(), d.begin() + P.T);
}

/* tsr_pack, setup: checks the items, zeroes their offsets and builds the problem over
 * compressed time from those with a non-empty range and a non-zero size (idx: problem
 * index -> item index). false: an error was set. */
static bool pk_make_problem(struct tsr_pack_item * items, size_t n, size_t alignment, pk_problem & P,
                            std::vector<size_t> & idx) {
    /* compress time to sections: sort the endpoints once and rank them */
    std::vector<std::pair<int64_t, uint32_t>> ev;  /* (time, 2 * problem index + is_upper) */
    ev.reserve(2 * n);
    for (size_t i = 0; i < n; i++) {
        if (items[i].upper < items[i].lower) {
            return tsr_set_error("tsr_pack: item %zu has lower %lld > upper %lld", i, (long long) items[i].lower, (long long) items[i].upper);
        }
        if (items[i].size > SIZE_MAX / 4) return tsr_set_error("tsr_pack: item %zu has size %zu, too large", i, items[i].size);
        items[i].offset = 0;
        if (items[i].upper == items[i].lower || items[i].size == 0) continue;
        const uint32_t k = (uint32_t) idx.size();
        idx.push_back(i);
        ev.emplace_back(items[i].lower, 2 * k);
        ev.emplace_back(items[i].upper, 2 * k + 1);
        P.sz.push_back(pk_align_up(items[i].size, alignment));
    }
    pk_sort_events(ev);
    P.l.resize(idx.size());
    P.r.resize(idx.size());
    pk_rank_sections(ev, P);
    P.n = (int) idx.size();
    if (P.n == 0) return true;
    pk_u64 total = 0;
    for (pk_u64 x : P.sz) {
        total += x;
        if (total > (pk_u64) (SIZE_MAX / 2)) {
            return tsr_set_error("tsr_pack: the sizes of the %d items add up to more than %zu bytes", P.n, (size_t) (SIZE_MAX / 2));
        }
    }
    pk_section_loads(P);
    return true;
}

/* What tsr_pack's phases share: the problem, the clock and the budget, the greedy's
 * scratch, and the best packing so far (peak, offsets, and the order that gave them). */
struct pk_packer {
    pk_problem & P;
    const pk_timer & timer;
    const double budget_ms;
    pk_u64 goal;               /* stop at a packing this low: the lower bound, or the caller's target above it */
    pk_placer pl;
    std::vector<pk_u64> off, best_off;
    pk_u64 best = PK_INF;
    std::vector<int> order, best_order;
    std::vector<pk_key> keys;
    double last_ms = 0;        /* how long the last greedy took: another starts only if it fits the budget */
    const int * try_order;     /* the greedy orders, in the order they are tried */
    int n_orders;

    pk_packer(pk_problem & p, const pk_timer & t, double budget) : P(p), timer(t), budget_ms(budget), goal(p.lb), order((size_t) p.n) {
        /* large instances (> 1,000 buffers) keep their time for the improvement phase: peak
         * first here, the other orders after the window search (above 5,000 buffers only the
         * first three) */
        static const int try_order_small[PK_N_ORDERS] = {0, 1, 4, 2, 3, 5, 6, 7};
        static const int try_order_large[PK_N_ORDERS] = {7, 1, 0, 4, 2, 3, 5, 6};
        try_order = P.n <= 1000 ? try_order_small : try_order_large;
        n_orders = P.n <= 5000 ? PK_N_ORDERS : 3;
    }

    /* time for one more greedy */
    bool time_left() const { return timer.ms() + last_ms < budget_ms; }

    /* the greedy in order `variant` (pk_order_key) */
    void run_order(int variant) {
        const double t_start = timer.ms();
        if (variant == 4 || variant == 5) pk_compute_load(P);
        pk_sort_order(P, variant, order, keys);
        const pk_u64 peak = pk_greedy(P, order, off, pl);
#ifdef TSR_PACK_DEBUG
        fprintf(stderr, "  variant %d peak %.5f  %.1f ms\n", variant, (double) peak / (double) P.lb, timer.ms());
#endif
        if (peak < best) { best = peak; best_off = off; best_order = order; }
        last_ms = timer.ms() - t_start;
    }

    /* 2, small instances: the branch and bound at the lower bound, then against targets
     * that descend from the best peak found (align: the step's granularity) */
    void search(pk_u64 align) {
        pk_clock clock(timer);
        clock.per_ms = PK_WORK_PER_MS;
        clock.wall_share = 1.0 / PK_WALL_SLACK;
        pk_search srch(P, clock);
        pk_u64 hi = best;  /* a packing with this peak is known */
        pk_u64 floor_target = P.lb;  /* no packing below it: the lower bound, or above a target proven impossible */
        long limit = 3000;
        int nrand = 0;
        /* a few orders against target under the node limit until `until` ms: true when one
         * packs. The search runs restricted (see pk_search::complete): a restricted search
         * that ends without hitting a limit is run again complete, and when that one ends
         * so, every packing in normal form has been tried: the target is impossible and no
         * other order is tried */
        auto keep_found = [&]() {
            pk_u64 peak = 0;
            for (int i = 0; i < P.n; i++) peak = std::max(peak, srch.off[(size_t) i] + P.sz[(size_t) i]);
            if (peak < best) { best = peak; best_off = srch.off; }
            hi = std::min(hi, peak);
        };
        auto attempt = [&](pk_u64 target, bool infer, long lim, double until) {
            bool complete = false;
            int v = 0;
            for (int k = 0; k < 6 && clock.ms() < until; k++) {
                static const int fixed[6] = {-1, 1, -1, 0, -1, -1};  /* -1: a random order */
                if (!complete) v = fixed[k] >= 0 ? fixed[k] : 3 + (nrand++);
                srch.infer = infer;
                srch.complete = complete;
                const bool okr = srch.run(target, v, until, lim);
#ifdef TSR_PACK_DEBUG
                fprintf(stderr, "  search target %.4f%s variant %d limit %ld: %s after %ld nodes, %.1f ms\n", (double) target / (double) P.lb,
                        infer ? " (inference)" : "", v, lim, okr ? "found" : srch.stop ? "no" : complete ? "impossible" : "none restricted", srch.nodes, clock.ms());
#endif
                if (okr) { keep_found(); return true; }
                if (!srch.stop && complete) { floor_target = std::max(floor_target, target + align); return false; }
                complete = !srch.stop;  /* exhausted restricted: the same order again, complete */
            }
            return false;
        };
        /* targets descending from the best packing (easy ones first) until `until` ms, or
         * until one is found when `first_only`. Every target is tried with the inference
         * bound once `infer_everywhere` (the descent after the walk, whose limits let a
         * search finish); before that, once a first packing below the greedy's is known,
         * every other target: with slack it prunes less for its cost, but some targets only
         * pack under it and others only without it. (That J found no packing below the
         * greedy's in 1 s with it everywhere was its limits: under its walk.) */
        pk_u64 step = (hi - goal) / 8;
        bool infer_next = false, infer_everywhere = false;
        auto descend = [&](double until, bool first_only) {
            while (hi > std::max(floor_target, goal) && clock.ms() < until) {
                step = std::max(step, align);
                pk_u64 target = hi - step;
                target -= target % align;
                if (target < std::max(floor_target, goal)) target = std::max(floor_target, goal);
                infer_next = !infer_next;
                if (attempt(target, target == P.lb || infer_everywhere || (infer_next && !first_only), limit, until)) {
                    if (first_only) return;
                } else {
                    step /= 2;
                    if (step < align || step * 64 < hi - goal) { step = (hi - goal) / 8; limit *= 2; }
                }
            }
        };
        /* the lower bound cheaply; then the bound again with node limits that double, each
         * limit once without and once with the inference bound, for 30 % of the budget
         * (they fail on different instances: of MiniMalloc's challenging traces A packs
         * without it in a fifth of the time, E only with it; those of A-K that pack there
         * do so within 15 %); then restarts at the bound (a fifth of what is left, each
         * dive at least a walk and a half long, see walk_nodes), then restarts that fail
         * first (15 % of what is left: the ones that pack K). The descent starts about
         * where it did when the bound had 40 % and no restarts failed first: taking their
         * time from the descent instead cost min-only D and J up to 1 % on shuffles of
         * their lines. Then a first packing below the best (at most half of what is left:
         * some instances need many orders for it); then the descent goes on */
        if (attempt(goal, false, limit, budget_ms)) return;
        const double lb_until = clock.ms() + 0.3 * (budget_ms - clock.ms());
        for (long lim = 2 * limit; floor_target <= goal && clock.ms() < lb_until; lim *= 2) {
            if (attempt(goal, false, lim, lb_until)) return;
            if (floor_target <= goal && attempt(goal, true, lim, lb_until)) return;
        }
        const long walk = walk_nodes(srch, keep_found);
        if (hi <= goal) return;
        const long dive_limit = std::max({1024L, 5L * P.n, walk + walk / 2});
        if (floor_target <= goal && dive_at_bound(srch, clock, clock.ms() + 0.2 * (budget_ms - clock.ms()), dive_limit, false, keep_found)) return;
        if (floor_target <= goal && dive_at_bound(srch, clock, clock.ms() + 0.15 * (budget_ms - clock.ms()), dive_limit, true, keep_found)) return;
        /* the descent: with limits under a walk and a half none of its searches could
         * finish (J's descent began at 3,000 nodes: 6 orders x 4 targets found nothing),
         * with the inference bound at every target, which with those limits gone packs J
         * at its known fit where alternating did not, and with steps from the gap the walk
         * left (on J 12 % under the greedy's: steps sized by the greedy's gap overshot to
         * targets none of 6 orders reached, and J fit for 6 of 8 seeds, 8 of 8 so) */
        limit = std::max(limit, walk + walk / 2);
        infer_everywhere = true;
        step = (hi - goal) / 8;
        descend(clock.ms() + 0.5 * (budget_ms - clock.ms()), true);
        descend(budget_ms, false);
    }

    /* The nodes a search takes to walk down to a packing where it has slack to spare (at
     * the best peak known, which the greedy met): every search takes at least about as
     * many, whatever its target, so a node limit under it stops every one of them short.
     * Holes count as nodes, so it is not the number of buffers: MiniMalloc's J (409
     * buffers, sizes down to 1/1,000 of its peak) takes ~5,000, H (316) ~950. The packing
     * it finds is kept (on J it is 12 % under the greedy's). 0 if it finds none. */
    template <class keep_t>
    long walk_nodes(pk_search & srch, keep_t & keep_found) {
        srch.infer = false;
        srch.complete = false;
        const bool ok = srch.run(best, 0, budget_ms, 64L * P.n);
#ifdef TSR_PACK_DEBUG
        fprintf(stderr, "  walk at %.4f: %s after %ld nodes\n", (double) best / (double) P.lb, ok ? "found" : "no", srch.nodes);
#endif
        if (!ok) return 0;
        keep_found();
        return srch.nodes;
    }

    /* Restarts at the lower bound until `until` ms: short dives (dive_limit nodes, with
     * the inference bound), each in a random order of its own. The time to find a packing
     * at the bound is heavy-tailed in the order: of 200 random orders, 7 pack MiniMalloc's
     * H within 1,500 nodes and 1 each I and K within 3,000, while the long searches of a
     * few orders find none in 2 s (Gomes et al., heavy-tailed phenomena in search). Which
     * dives hit is luck of the seeds: with seeds from 2^20 none hit H or I in 1 s. The
     * dives' orders are apart from the attempts' (their own seeds), so the later phases
     * try the orders they did without them. `fail_first`: the second family (see
     * pk_search::fail_first), the one that packs K. */
    template <class keep_t>
    bool dive_at_bound(pk_search & srch, pk_clock & clock, double until, long dive_limit, bool fail_first, keep_t & keep_found) {
        for (int k = 0; clock.ms() < until; k++) {
            srch.infer = true;
            srch.complete = false;
            srch.fail_first = fail_first;
            const bool ok = srch.run(goal, PK_DIVE_SEEDS + k, until, dive_limit);
            srch.fail_first = false;
#ifdef TSR_PACK_DEBUG
            fprintf(stderr, "  dive %d at the bound: %s after %ld nodes, %.1f ms\n", k, ok ? "found" : "no", srch.nodes, clock.ms());
#endif
            if (ok) { keep_found(); return true; }
        }
        return false;
    }

    /* 2a, large instances: the window around the peak packed exactly, then the others
     * around it, in a few orders */
    void window() {
        std::vector<int> win, rest;
        std::vector<pk_u64> win_off;
        std::vector<char> in_win((size_t) P.n);
        static const int halves[4] = {30, 100, 300, 10};
        for (int h = 0; h < 4 && best > goal && time_left(); h++) {
            if (!pk_window(P, halves[h], timer, budget_ms, win, win_off)) continue;
            std::fill(in_win.begin(), in_win.end(), 0);
            for (int i : win) in_win[(size_t) i] = 1;
            static const int rest_orders[3] = {1, 0, 7};
            for (int ro = 0; ro < 3 && best > goal && time_left(); ro++) {
                const double t_start = timer.ms();
                pk_sort_order(P, rest_orders[ro], rest, keys);
                order = win;
                for (int i : rest) if (!in_win[(size_t) i]) order.push_back(i);
                for (size_t k = 0; k < win.size(); k++) off[(size_t) win[k]] = win_off[k];
                const pk_u64 peak = pk_greedy(P, order, off, pl, win.size());
#ifdef TSR_PACK_DEBUG
                fprintf(stderr, "  window +-%d, the others in order %d: peak %.5f  %.1f ms\n", halves[h], rest_orders[ro], (double) peak / (double) P.lb, timer.ms());
#endif
                if (peak < best) { best = peak; best_off = off; best_order = order; }
                last_ms = timer.ms() - t_start;
            }
        }
    }

    /* 1b / 2c: promote the overflow: the buffers that end above a level H (at first the
     * lower bound) move to the front of the best order, keeping their relative
     * order, and the greedy runs again (small long-lived buffers piled on top
     * go to the bottom this way). H drops while it does not help. At most 64 greedy
     * runs; `timed`: only while the budget lasts (small instances run it regardless,
     * as one of the heuristics: it is what packs the scheduler's weight-copy graphs
     * at their bound, where the search needs ~50,000 nodes). */
    void promote_overflow(bool timed) {
        std::vector<int> ord = best_order;
        std::vector<char> hot((size_t) P.n);
        double f = 1.0;
        for (int it = 0; it < 64 && best > goal && f > 0.05; it++) {
            if (timed && timer.ms() + last_ms > budget_ms) break;
            const double t_start = timer.ms();
            const pk_u64 H = (pk_u64) ((double) P.lb * f);
            for (int i = 0; i < P.n; i++) hot[(size_t) i] = best_off[(size_t) i] + P.sz[(size_t) i] > H;
            std::stable_partition(ord.begin(), ord.end(), [&](int i) { return hot[(size_t) i] != 0; });
            const pk_u64 peak = pk_greedy(P, ord, off, pl);
#ifdef TSR_PACK_DEBUG
            fprintf(stderr, "  promote f %.3f: peak %.5f  %.1f ms\n", f, (double) peak / (double) P.lb, timer.ms());
#endif
            if (peak < best) { best = peak; best_off = off; best_order = ord; }
            else { ord = best_order; f -= 0.1; }
            last_ms = timer.ms() - t_start;
        }
    }

    /* 2d: a random walk on orders: a few buffers each move a short way in the best
     * order; kept when the peak does not grow (plateaus are crossed this way) */
    void random_walk() {
        std::vector<int> ord;
        uint64_t x = 0x9E3779B97F4A7C15ull;
        auto rnd = [&](uint64_t m) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return m ? x % m : 0; };
        for (int it = 0; best > goal; it++) {
            if (timer.ms() + last_ms > budget_ms) break;
            const double t_start = timer.ms();
            ord = best_order;
            const int moves = 1 + (int) rnd((uint64_t) std::max(1, P.n / 256));
            for (int k = 0; k < moves; k++) {
                const size_t a = (size_t) rnd((uint64_t) P.n);
                const size_t b = std::min((size_t) P.n - 1, a + 1 + (size_t) rnd(64));
                std::rotate(ord.begin() + (ptrdiff_t) a, ord.begin() + (ptrdiff_t) a + 1, ord.begin() + (ptrdiff_t) b + 1);
            }
            const pk_u64 peak = pk_greedy(P, ord, off, pl);
#ifdef TSR_PACK_DEBUG
            fprintf(stderr, "  walk %d (%d moves): peak %.5f  %.1f ms\n", it, moves, (double) peak / (double) P.lb, timer.ms());
#endif
            if (peak <= best) { best = peak; best_off = off; best_order = ord; }
            last_ms = timer.ms() - t_start;
        }
    }
};

static size_t pk_pack_body(struct tsr_pack_item * items, size_t n, size_t alignment, double work_budget_ms, size_t target_peak) {
    const pk_timer timer;
    if (alignment == 0) alignment = 1;
    if ((alignment & (alignment - 1)) != 0) {
        tsr_set_error("tsr_pack: alignment %zu is not a power of two", alignment);
        return SIZE_MAX;
    }
    if (n == 0) return 0;
    if (!items) { tsr_set_error("tsr_pack: items is NULL with n = %zu", n); return SIZE_MAX; }
    if (n > (size_t) INT32_MAX / 2) { tsr_set_error("tsr_pack: %zu items is too many", n); return SIZE_MAX; }

    pk_problem P;
    std::vector<size_t> idx;  /* problem index -> item index */
    if (!pk_make_problem(items, n, alignment, P, idx)) return SIZE_MAX;
    if (P.n == 0) return 0;

#ifdef TSR_PACK_DEBUG
    fprintf(stderr, "  %d buffers, %d sections, setup %.1f ms\n", P.n, P.T, timer.ms());
#endif
    /* 1. greedy first fit in several orders: small instances try every order (each takes
     * well under a millisecond), large ones only the first */
    pk_packer pk(P, timer, work_budget_ms);
    pk.goal = std::max(P.lb, (pk_u64) target_peak);
    const int n_first = P.n <= 1000 ? pk.n_orders : 1;
    for (int vi = 0; vi < n_first && pk.best > pk.goal; vi++) pk.run_order(pk.try_order[vi]);
    if (P.n <= 1000) pk.promote_overflow(false);

    /* 2. improvement while time is left */
    /* small instances search whatever the heuristics took (on the work clock, so that the
     * answer never depends on the load); large ones improve only while wall time is left */
    if (pk.best > pk.goal && work_budget_ms > 0 && (P.n <= 1000 || timer.ms() < work_budget_ms)) {
        if (P.n <= 1000) {
            pk.search((pk_u64) alignment);
        } else {
            pk.window();
            /* 2b: the other orders */
            for (int vi = 1; vi < pk.n_orders && pk.best > pk.goal && pk.time_left(); vi++) pk.run_order(pk.try_order[vi]);
            pk.promote_overflow(true);
            pk.random_walk();
        }
    }

    for (int i = 0; i < P.n; i++) items[idx[(size_t) i]].offset = (size_t) pk.best_off[(size_t) i];
    return (size_t) pk.best;
}
} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL size_t tsr_pack_lower_bound(const struct tsr_pack_item * items, size_t n, size_t alignment) {
    try {
        return tsr_impl::pk_lower_bound_body(items, n, alignment);
    } catch (...) {
        tsr_set_error("tsr_pack_lower_bound: out of memory for %zu items", n);
        return SIZE_MAX;
    }
}

TSR_API_IMPL size_t tsr_pack_ex(struct tsr_pack_item * items, size_t n, const struct tsr_pack_params * params) {
    if (!params) { tsr_set_error("tsr_pack_ex: params is NULL"); return SIZE_MAX; }
    try {
        return tsr_impl::pk_pack_body(items, n, params->alignment, params->work_budget_ms, params->target_peak);
    } catch (...) {
        for (size_t i = 0; items && i < n; i++) items[i].offset = 0;
        tsr_set_error("tsr_pack: out of memory for %zu items", n);
        return SIZE_MAX;
    }
}

TSR_API_IMPL size_t tsr_pack(struct tsr_pack_item * items, size_t n, size_t alignment, double work_budget_ms) {
    const struct tsr_pack_params params = {alignment, work_budget_ms, 0};
    return tsr_pack_ex(items, n, &params);
}
