/*
 * threadpool.inl - a persistent pool: n-1 workers plus the calling thread.
 *
 * One job (a whole graph) is posted per run; workers spin briefly on the job counter,
 * then block on a condition variable, so an idle pool costs nothing and a 2-core machine
 * shared with other work is not starved. Nodes are separated by a spin-then-yield
 * barrier. No thread is created per graph.
 */
namespace {
namespace tcpu {

static inline void cpu_relax() {
#if defined(TSR_CPU_X86)
    _mm_pause();
#elif defined(TSR_CPU_ARM64)
    __asm__ __volatile__("yield");
#endif
}

struct pool {
    typedef void (*job_fn)(void * arg, int ith, int nth);

    int n_threads = 1;
    std::vector<std::thread> workers;
    std::mutex mtx;
    std::condition_variable cv;
    std::atomic<uint64_t> gen{0};
    std::atomic<bool> stop{false};
    std::atomic<int> n_done{0};
    job_fn job = nullptr;
    void * job_arg = nullptr;

    /* barrier state: arrivals and a phase counter */
    alignas(64) std::atomic<int> bar_count{0};
    alignas(64) std::atomic<int> bar_phase{0};
    /* dynamic work distribution inside a node: reset to 0 by every barrier */
    alignas(64) std::atomic<int64_t> chunk{0};

    static constexpr int SPIN_IDLE = 1 << 14;   /* ~50-100 us of pauses before blocking */
    static constexpr int SPIN_BARRIER = 1 << 12;

    explicit pool(int n) : n_threads(n < 1 ? 1 : n) {
        workers.reserve((size_t)(n_threads - 1));
        try {
            for (int i = 1; i < n_threads; ++i) workers.emplace_back([this, i] { worker_main(i); });
        } catch (...) {
            /* a thread failed to start: stop and join the ones running, so no joinable
             * std::thread is destroyed (std::terminate), then let make_pool report it */
            shutdown();
            throw;
        }
    }
    ~pool() { shutdown(); }
    void shutdown() {
        {
            std::lock_guard<std::mutex> lk(mtx);
            stop.store(true, std::memory_order_release);
            gen.fetch_add(1, std::memory_order_acq_rel);
        }
        cv.notify_all();
        for (auto & t : workers) t.join();
        workers.clear();
    }
    pool(const pool &) = delete;
    pool & operator=(const pool &) = delete;

    void worker_main(int ith) {
        uint64_t seen = 0;
        for (;;) {
            int spins = 0;
            uint64_t g = gen.load(std::memory_order_acquire);
            while (g == seen && spins < SPIN_IDLE) {
                cpu_relax();
                ++spins;
                g = gen.load(std::memory_order_acquire);
            }
            if (g == seen) {
                std::unique_lock<std::mutex> lk(mtx);
                cv.wait(lk, [&] { return gen.load(std::memory_order_acquire) != seen; });
                g = gen.load(std::memory_order_acquire);
            }
            seen = g;
            if (stop.load(std::memory_order_acquire)) return;
            job(job_arg, ith, n_threads);
            n_done.fetch_add(1, std::memory_order_acq_rel);
        }
    }

    /* Runs fn(arg, ith, nth) on every thread (the caller is thread 0); returns when all
     * have finished. */
    void run(job_fn fn, void * arg) {
        if (n_threads == 1) { fn(arg, 0, 1); return; }
        n_done.store(0, std::memory_order_relaxed);
        chunk.store(0, std::memory_order_relaxed);   /* the last node of a graph ends without a barrier */
        {
            std::lock_guard<std::mutex> lk(mtx);
            job = fn;
            job_arg = arg;
            gen.fetch_add(1, std::memory_order_acq_rel);
        }
        cv.notify_all();
        fn(arg, 0, n_threads);
        int spins = 0;
        while (n_done.load(std::memory_order_acquire) != n_threads - 1) {
            if (++spins < SPIN_BARRIER) cpu_relax(); else std::this_thread::yield();
        }
    }

    /* idle(): work for a thread that waits (true: it did some, so no pause this turn) */
    template <class Idle> void barrier(Idle && idle) {
        if (n_threads == 1) return;
        const int phase = bar_phase.load(std::memory_order_acquire);
        if (bar_count.fetch_add(1, std::memory_order_acq_rel) == n_threads - 1) {
            bar_count.store(0, std::memory_order_relaxed);
            chunk.store(0, std::memory_order_relaxed);
            bar_phase.fetch_add(1, std::memory_order_acq_rel);
            return;
        }
        int spins = 0;
        while (bar_phase.load(std::memory_order_acquire) == phase) {
            if (idle()) continue;
            if (++spins < SPIN_BARRIER) cpu_relax(); else std::this_thread::yield();
        }
    }
    void barrier() {
        barrier([] { return false; });
    }
};

static void barrier(const cparams & p) {
    if (p.nth > 1) p.tp->barrier();
}
/* The same, idle() run while this thread waits (pool::barrier). */
template <class Idle> static void barrier(const cparams & p, Idle && idle) {
    if (p.nth > 1) p.tp->barrier(idle);
}

} // namespace tcpu
} // namespace
