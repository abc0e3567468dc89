/*
 * workspace.inl - the CPU backend's one scratch block (ncnn's workspace allocator).
 *
 * Each op states the scratch it needs (op_work_size in backend_cpu.inl); reserve/compute
 * take the maximum over the graph and grow this block only when a graph needs more.
 * Memory comes from the backend's host allocator.
 */
namespace {
namespace tcpu {

struct workspace {
    tsr_host_allocator alloc{};
    bool   has_alloc = false;   /* false: use tsr_get_host_allocator() at allocation time */
    void * ptr = nullptr;
    size_t size = 0;
    tsr_host_allocator used{};  /* the allocator ptr came from */

    static constexpr size_t ALIGN = 64;

    void release() {
        if (ptr && used.free) used.free(ptr, used.user);
        ptr = nullptr;
        size = 0;
    }
    /* Grow to at least `need` bytes (never shrinks). false + error on failure. */
    bool reserve(size_t need) {
        if (need <= size) return true;
        release();
        const tsr_host_allocator * a = has_alloc ? &alloc : tsr_get_host_allocator();
        if (!a || !a->alloc) return tsr_set_error("CPU backend: no host allocator for a %zu-byte workspace", need);
        const size_t sz = align_up(need, 4096);
        void * p = a->alloc(sz, ALIGN, a->user);
        if (!p) return tsr_set_error("CPU backend: workspace allocation of %zu bytes failed", sz);
        ptr = p;
        size = sz;
        used = *a;
        return true;
    }
    ~workspace() { release(); }
};

} // namespace tcpu
} // namespace
