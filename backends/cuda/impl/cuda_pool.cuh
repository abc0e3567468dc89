// tessera CUDA backend: best-fit pool of device blocks for scratch memory.
#pragma once

namespace tsr_cuda {
namespace {

// A cache of cudaMalloc'd blocks. acquire() returns the smallest free cached block that
// is at least `size` and at most max_waste times it, else cudaMallocs a new one (a miss).
// release() returns a block to the cache. The backend acquires its workspace and cuBLAS
// workspace here when planning (graph_reserve / the start of graph_compute), never while
// nodes run. Not thread-safe: one pool per backend, used by its owner thread.
class device_pool {
public:
    explicit device_pool(int device) : device_(device) {}
    ~device_pool() { clear(); }
    device_pool(const device_pool &) = delete;
    device_pool & operator=(const device_pool &) = delete;

    void * acquire(size_t size) {
        size = (size + 255) & ~(size_t) 255;
        if (size == 0) size = 256;
        int best = -1;
        for (int i = 0; i < (int) blocks_.size(); ++i) {
            const block & b = blocks_[i];
            if (b.in_use || b.size < size || (double) b.size > max_waste_ * (double) size) continue;
            if (best < 0 || b.size < blocks_[best].size) best = i;
        }
        if (best >= 0) {
            blocks_[best].in_use = true;
            ++hits_;
            return blocks_[best].ptr;
        }
        void * p = nullptr;
        cudaError_t err = cudaSetDevice(device_);
        if (err == cudaSuccess) err = cudaMalloc(&p, size);
        if (err != cudaSuccess) {
            // free idle cached blocks and retry once
            trim();
            cudaGetLastError();
            err = cudaMalloc(&p, size);
        }
        if (err != cudaSuccess) {
            cudaGetLastError();
            tsr_set_error("cuda: scratch pool cudaMalloc(%zu bytes) failed on device %d: %s (cached %zu bytes)",
                          size, device_, cudaGetErrorString(err), cached_bytes());
            return nullptr;
        }
        ++misses_;
        blocks_.push_back(block{p, size, true});
        return p;
    }

    void release(void * p) {
        if (!p) return;
        for (block & b : blocks_) if (b.ptr == p) { b.in_use = false; return; }
    }

    // Free every cached block that is not in use.
    void trim() {
        cudaSetDevice(device_);
        std::vector<block> keep;
        for (const block & b : blocks_) {
            if (b.in_use) keep.push_back(b);
            else cudaFree(b.ptr);
        }
        blocks_.swap(keep);
    }

    void clear() {
        if (blocks_.empty()) return;
        cudaSetDevice(device_);
        for (const block & b : blocks_) cudaFree(b.ptr);
        blocks_.clear();
    }

    size_t cached_bytes() const {
        size_t s = 0;
        for (const block & b : blocks_) s += b.size;
        return s;
    }
    size_t hits() const { return hits_; }
    size_t misses() const { return misses_; }

private:
    struct block { void * ptr; size_t size; bool in_use; };
    int device_;
    double max_waste_ = 2.0;
    std::vector<block> blocks_;
    size_t hits_ = 0, misses_ = 0;
};

} // namespace
} // namespace tsr_cuda
