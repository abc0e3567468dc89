/*
 * host_allocators.inl - the shipped host allocators: a pool that keeps blocks between
 * runs (ncnn's pool allocator idea) and a tracing allocator (counts, current/peak).
 * Both are tsr_host_allocator implementations stacked on an upstream allocator.
 */

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

TSR_IMPL_NS_BEGIN
TSR_IMPL_HANDLE(tsr_pool_allocator, pool_allocator)
TSR_IMPL_HANDLE(tsr_tracing_allocator, tracing_allocator)

struct pool_allocator {
    struct tsr_host_allocator host;      /* what users plug in: points back here */
    struct tsr_host_allocator upstream;
    size_t budget;
    double max_waste_ratio;
    bool thread_safe;
    std::mutex mutex;
    struct block { void * ptr; size_t size; size_t align; uint64_t stamp; };
    std::vector<block> cached;           /* freed blocks kept for reuse */
    std::unordered_map<void *, block> live;
    uint64_t clock = 0;
    struct tsr_pool_allocator_stats stats = {0, 0, 0, 0, 0, 0};
};

struct tracing_allocator {
    struct tsr_host_allocator host;
    struct tsr_host_allocator upstream;
    std::mutex mutex;                    /* guards sizes */
    std::unordered_map<void *, size_t> sizes;
    std::atomic<size_t> current{0}, peak{0}, n_allocs{0}, n_frees{0}, total{0};
};

namespace {

/* cached bytes above `budget` go back upstream, oldest first (caller holds the lock) */
static void pool_trim_locked(pool_allocator * p, size_t budget) {
    while (p->stats.cached_bytes > budget && !p->cached.empty()) {
        size_t oldest = 0;
        for (size_t i = 1; i < p->cached.size(); i++) {
            if (p->cached[i].stamp < p->cached[oldest].stamp) oldest = i;
        }
        pool_allocator::block b = p->cached[oldest];
        p->cached.erase(p->cached.begin() + (ptrdiff_t) oldest);
        p->stats.cached_bytes -= b.size;
        p->stats.cached_blocks--;
        p->upstream.free(b.ptr, p->upstream.user);
        p->stats.upstream_frees++;
    }
}

static void * pool_alloc(size_t size, size_t align, void * user) {
    pool_allocator * p = (pool_allocator *) user;
    std::unique_lock<std::mutex> lock(p->mutex, std::defer_lock);
    if (p->thread_safe) lock.lock();
    /* the smallest cached block that is large enough, suitably aligned and not wastefully larger */
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->cached.size(); i++) {
        const pool_allocator::block & b = p->cached[i];
        if (b.size < size || ((uintptr_t) b.ptr % align) != 0) continue;
        if ((double) b.size > (double) size * p->max_waste_ratio && b.size > size) continue;
        if (best == SIZE_MAX || b.size < p->cached[best].size) best = i;
    }
    if (best != SIZE_MAX) {
        pool_allocator::block b = p->cached[best];
        p->cached.erase(p->cached.begin() + (ptrdiff_t) best);
        p->stats.cached_bytes -= b.size;
        p->stats.cached_blocks--;
        p->stats.hits++;
        try { p->live.emplace(b.ptr, b); } catch (...) {
            p->cached.push_back(b);
            p->stats.cached_bytes += b.size;
            p->stats.cached_blocks++;
            return nullptr;
        }
        return b.ptr;
    }
    p->stats.misses++;
    void * ptr = p->upstream.alloc(size, align, p->upstream.user);
    if (!ptr) {
        /* give the cache back and try once more */
        pool_trim_locked(p, 0);
        ptr = p->upstream.alloc(size, align, p->upstream.user);
        if (!ptr) return nullptr;
    }
    p->stats.upstream_allocs++;
    try { p->live.emplace(ptr, pool_allocator::block{ptr, size, align, 0}); } catch (...) {
        p->upstream.free(ptr, p->upstream.user);
        p->stats.upstream_frees++;
        return nullptr;
    }
    return ptr;
}

static void pool_free(void * ptr, void * user) {
    if (!ptr) return;
    pool_allocator * p = (pool_allocator *) user;
    std::unique_lock<std::mutex> lock(p->mutex, std::defer_lock);
    if (p->thread_safe) lock.lock();
    auto it = p->live.find(ptr);
    if (it == p->live.end()) {
        tsr_set_error("tsr_pool_allocator: free of %p, which this pool did not allocate", ptr);
        return;
    }
    pool_allocator::block b = it->second;
    p->live.erase(it);
    b.stamp = ++p->clock;
    try { p->cached.push_back(b); } catch (...) {
        p->upstream.free(b.ptr, p->upstream.user);
        p->stats.upstream_frees++;
        return;
    }
    p->stats.cached_bytes += b.size;
    p->stats.cached_blocks++;
    pool_trim_locked(p, p->budget);
}

static void * tracing_alloc(size_t size, size_t align, void * user) {
    tracing_allocator * t = (tracing_allocator *) user;
    void * ptr = t->upstream.alloc(size, align, t->upstream.user);
    if (!ptr) return nullptr;
    {
        std::lock_guard<std::mutex> lock(t->mutex);
        try { t->sizes[ptr] = size; } catch (...) { t->upstream.free(ptr, t->upstream.user); return nullptr; }
    }
    t->n_allocs++;
    t->total += size;
    const size_t cur = (t->current += size);
    size_t pk = t->peak.load();
    while (cur > pk && !t->peak.compare_exchange_weak(pk, cur)) {}
    return ptr;
}

static void tracing_free(void * ptr, void * user) {
    if (!ptr) return;
    tracing_allocator * t = (tracing_allocator *) user;
    size_t size = 0;
    {
        std::lock_guard<std::mutex> lock(t->mutex);
        auto it = t->sizes.find(ptr);
        if (it == t->sizes.end()) {
            tsr_set_error("tsr_tracing_allocator: free of %p, which was not allocated through it", ptr);
            return;
        }
        size = it->second;
        t->sizes.erase(it);
    }
    t->current -= size;
    t->n_frees++;
    t->upstream.free(ptr, t->upstream.user);
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL struct tsr_pool_allocator * tsr_pool_allocator_new(const struct tsr_host_allocator * upstream, size_t budget,
                                                                double max_waste_ratio, bool thread_safe) {
    tsr_impl::pool_allocator * p = new (std::nothrow) tsr_impl::pool_allocator;
    if (!p) { tsr_set_error("tsr_pool_allocator_new: out of memory"); return nullptr; }
    p->upstream = (upstream && upstream->alloc && upstream->free) ? *upstream : tsr_impl::k_host_default;
    p->budget = budget;
    p->max_waste_ratio = max_waste_ratio < 1.0 ? 1.0 : max_waste_ratio;
    p->thread_safe = thread_safe;
    p->host.alloc = tsr_impl::pool_alloc;
    p->host.free = tsr_impl::pool_free;
    p->host.user = p;
    return tsr_impl::handle(p);
}
TSR_API_IMPL void tsr_pool_allocator_free(struct tsr_pool_allocator * pool_h) {
    auto * pool = tsr_impl::internal(pool_h);
    if (!pool) return;
    tsr_impl::pool_trim_locked(pool, 0);
    delete pool;
}
TSR_API_IMPL const struct tsr_host_allocator * tsr_pool_allocator_host(struct tsr_pool_allocator * pool_h) {
    auto * pool = tsr_impl::internal(pool_h);
    return pool ? &pool->host : nullptr;
}
TSR_API_IMPL void tsr_pool_allocator_trim(struct tsr_pool_allocator * pool_h, size_t budget) {
    auto * pool = tsr_impl::internal(pool_h);
    if (!pool) return;
    std::unique_lock<std::mutex> lock(pool->mutex, std::defer_lock);
    if (pool->thread_safe) lock.lock();
    pool->budget = budget;
    tsr_impl::pool_trim_locked(pool, budget);
}
TSR_API_IMPL struct tsr_pool_allocator_stats tsr_pool_allocator_get_stats(struct tsr_pool_allocator * pool_h) {
    auto * pool = tsr_impl::internal(pool_h);
    struct tsr_pool_allocator_stats s = {0, 0, 0, 0, 0, 0};
    if (!pool) return s;
    std::unique_lock<std::mutex> lock(pool->mutex, std::defer_lock);
    if (pool->thread_safe) lock.lock();
    return pool->stats;
}

TSR_API_IMPL struct tsr_tracing_allocator * tsr_tracing_allocator_new(const struct tsr_host_allocator * upstream) {
    tsr_impl::tracing_allocator * t = new (std::nothrow) tsr_impl::tracing_allocator;
    if (!t) { tsr_set_error("tsr_tracing_allocator_new: out of memory"); return nullptr; }
    t->upstream = (upstream && upstream->alloc && upstream->free) ? *upstream : tsr_impl::k_host_default;
    t->host.alloc = tsr_impl::tracing_alloc;
    t->host.free = tsr_impl::tracing_free;
    t->host.user = t;
    return tsr_impl::handle(t);
}
TSR_API_IMPL void tsr_tracing_allocator_free(struct tsr_tracing_allocator * tr_h) { auto * tr = tsr_impl::internal(tr_h); delete tr; }
TSR_API_IMPL const struct tsr_host_allocator * tsr_tracing_allocator_host(struct tsr_tracing_allocator * tr_h) {
    auto * tr = tsr_impl::internal(tr_h);
    return tr ? &tr->host : nullptr;
}
TSR_API_IMPL struct tsr_tracing_stats tsr_tracing_allocator_get_stats(struct tsr_tracing_allocator * tr_h) {
    auto * tr = tsr_impl::internal(tr_h);
    struct tsr_tracing_stats s = {0, 0, 0, 0, 0};
    if (!tr) return s;
    s.current_bytes = tr->current.load();
    s.peak_bytes = tr->peak.load();
    s.n_allocs = tr->n_allocs.load();
    s.n_frees = tr->n_frees.load();
    s.total_bytes = tr->total.load();
    return s;
}
TSR_API_IMPL void tsr_tracing_allocator_reset_peak(struct tsr_tracing_allocator * tr_h) {
    auto * tr = tsr_impl::internal(tr_h);
    if (tr) tr->peak.store(tr->current.load());
}
