/*
 * repack.inl - the CPU_REPACK buffer type: host memory in which 4- and 5-bit, Q3_K and Q2_K weight
 * matrices are stored in the 4-bit interleaved layout of repack_r8.inl, in place of the
 * file's bytes (the same bytes, permuted: no memory beyond the plain buffer's). Every other
 * tensor keeps its bytes as set.
 *
 * Who reads the layout: mul_mat (src0: the GEMM packs its A panels from it without
 * shuffles, the matrix-vector path reads it directly), mul_mat_id (src0, the word layouts
 * only: they are the only ones a 3D expert tensor takes) and get_rows (rows converted back,
 * so token embeddings may live here). tsr_backend_tensor_get converts back to the file's bytes;
 * the CPU backend refuses any other op reading a repacked tensor, and views of one.
 *
 * When: a matrix is repacked when a write reaches its last byte (loaders write a tensor
 * front to back), and a later partial write or memset goes through the file's bytes (the
 * matrix converted back, written, repacked). Writes that bypass tsr_backend_tensor_set
 * (through tensor->data) are not seen: set the tensor again after them (a set whose data is
 * the tensor's own memory says it holds the file's bytes, all of it for a repacked one).
 *
 * Q2_K on CPUs with AVX-512 VNNI, and Q3_K on those with GFNI and VBMI too, take other
 * layouts: the file's rows and blocks with each block's levels regrouped by sub-block
 * (repack_words.inl, "words"); the rest of this file treats them as one more repacked layout
 * (r8_record::words says which).
 *
 * Which: contiguous 2D matrices of the types is_r8_type lists (those beyond Q4_0, IQ4_NL, Q4_K where
 * r8_type_has_simd says a SIMD kernel reads them) with a multiple of 8 rows (the words: any
 * contiguous tensor, MoE experts' 3D ones included), in builds with
 * a SIMD mat-vec for the layout (x86; not yet aarch64, whose NEON dots read the file's
 * layout faster than the scalar one would read this). The layout does not depend on the
 * ISA, so switching ISA (tsr_backend_cpu_set_isa) keeps it valid.
 */
#include <memory>

namespace {
namespace tcpu {

/* What a repacked tensor looked like when it was repacked: a tensor header that no longer
 * matches (moved, retyped, reshaped) is not read as repacked. */
struct r8_record {
    const void * data;
    enum tsr_type type;
    int64_t ne[4];
    bool words;  /* Q2_K / Q3_K in the word layout of repack_words.inl, not in records */
};

struct repack_buffer_ctx {
    tsr_backend_buffer_t host;      /* plain CPU buffer holding the bytes */
    std::mutex mutex;
    std::vector<std::unique_ptr<r8_record>> records;  /* kept until the buffer goes: headers point at them */
};

static bool repack_buffer_set_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * t, const void * data, size_t offset, size_t size);

static bool is_repack_buffer(const tsr_backend_buffer * b) {
    return b && b->iface.set_tensor == repack_buffer_set_tensor;
}

static bool is_r8_repacked(const tsr_tensor * t) {
    if (!t || !is_repack_buffer(t->buffer) || !t->extra || t->view_src) return false;
    const r8_record * r = (const r8_record *)t->extra;
    if (r->data != t->data || r->type != t->type) return false;
    for (int i = 0; i < 4; ++i)
        if (r->ne[i] != t->ne[i]) return false;
    return true;
}

/* t holds Q2_K's or Q3_K's word layout (repack_words.inl): the file's order, bits regrouped. */
static bool is_words_repacked(const tsr_tensor * t) {
    return is_r8_repacked(t) && ((const r8_record *)t->extra)->words;
}

/* t, or the tensor t views, holds a CPU_REPACK layout. */
static bool reads_r8_bytes(const tsr_tensor * t) {
    return t && (is_r8_repacked(t) || is_r8_repacked(t->view_src));
}

/* Q2_K and Q3_K go to their word layouts here (any number of rows), not to records. */
static bool words_layout_for(const tsr_tensor * t) { return words_layout_for_type(t->type); }

/* The words take any shape (every super-block in place: a MoE file's 3D expert tensors
 * too, which mul_mat_id reads); the records 2D matrices of whole groups of rows. */
static bool r8_eligible(const tsr_tensor * t) {
    if (!k_r8_layout_used || !is_r8_type(t->type) || !r8_type_has_simd(t->type) || t->view_src || !tsr_is_contiguous(t)) return false;
    return words_layout_for(t) || (t->ne[2] == 1 && t->ne[3] == 1 && t->ne[1] % R8 == 0);
}

/* Every group of t rewritten in place, to the interleaved layout or back to the file's
 * (the words: every super-block in place). */
static bool r8_convert_tensor(struct tsr_tensor * t, bool to_r8, bool words) {
    const int64_t nb = t->ne[0] / tsr_blck_size(t->type);
    if (words) {
        words_blocks_in_place(t->type, (uint8_t *)t->data, nb * tsr_nrows(t), to_r8);
        return true;
    }
    std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[(size_t)nb * r8_record_bytes(t->type)]);
    if (!tmp) return false;
    for (int64_t g0 = 0; g0 < t->ne[1]; g0 += R8) r8_group_in_place(t->type, (uint8_t *)t->data + (size_t)g0 * t->nb[1], nb, to_r8, tmp.get());
    return true;
}

/* t back in the file's layout, no longer marked. */
static void r8_unpack(repack_buffer_ctx * c, struct tsr_tensor * t) {
    if (!is_r8_repacked(t)) return;
    r8_convert_tensor(t, false, is_words_repacked(t));
    std::lock_guard<std::mutex> lock(c->mutex);
    t->extra = nullptr;
}

/* t repacked and marked, when it qualifies (and memory for the record and a group's
 * scratch is there: else it keeps the file's layout, which every kernel reads too). */
static void r8_pack(repack_buffer_ctx * c, struct tsr_tensor * t) {
    if (!r8_eligible(t)) return;
    const bool words = words_layout_for(t);
    std::unique_ptr<r8_record> r(new (std::nothrow) r8_record{t->data, t->type, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, words});
    if (!r) return;
    {
        std::lock_guard<std::mutex> lock(c->mutex);
        try { c->records.push_back(std::move(r)); } catch (...) { return; }
    }
    if (!r8_convert_tensor(t, true, words)) return;
    std::lock_guard<std::mutex> lock(c->mutex);
    t->extra = c->records.back().get();
}

/* Where a view of a repacked tensor starts in it. */
static size_t view_offset(const tsr_tensor * t) { return (size_t)((const char *)t->data - (const char *)t->view_src->data); }

static bool repack_buffer_set_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * t, const void * data, size_t offset, size_t size) {
    if (t->view_src && is_r8_repacked(t->view_src))
        return repack_buffer_set_tensor(buffer, t->view_src, data, offset + view_offset(t), size);
    repack_buffer_ctx * c = (repack_buffer_ctx *)buffer->context;
    const bool was_repacked = is_r8_repacked(t);
    const bool in_place = data == (const char *)t->data + offset;  /* loaded there: those are the file's bytes */
    if (in_place) {
        std::lock_guard<std::mutex> lock(c->mutex);
        t->extra = nullptr;
    } else {
        r8_unpack(c, t);
        std::memcpy((char *)t->data + offset, data, size);
    }
    if (was_repacked || offset + size == tsr_nbytes(t)) r8_pack(c, t);
    return true;
}

/* Bytes [offset, offset + size) of the file's layout of a repacked t, a group at a time
 * (the words: a super-block at a time). */
static bool r8_get(const struct tsr_tensor * t, void * data, size_t offset, size_t size) {
    if (is_words_repacked(t)) {
        const size_t bb = tsr_type_size(t->type);
        for (size_t b = offset / bb * bb; b < offset + size; b += bb) {
            uint8_t blk[R8_MAX_BLOCK_BYTES];
            std::memcpy(blk, (const uint8_t *)t->data + b, bb);
            words_blocks_in_place(t->type, blk, 1, false);
            const size_t lo = std::max(b, offset), hi = std::min(b + bb, offset + size);
            std::memcpy((char *)data + (lo - offset), blk + (lo - b), hi - lo);
        }
        return true;
    }
    const int64_t nb = t->ne[0] / tsr_blck_size(t->type);
    const size_t row_bytes = (size_t)nb * tsr_type_size(t->type), group_bytes = R8 * row_bytes;
    std::unique_ptr<uint8_t[]> tmp(new (std::nothrow) uint8_t[group_bytes]);
    if (!tmp) return tsr_set_error("CPU_REPACK: out of memory reading tensor '%s'", t->name);
    for (size_t g = offset / group_bytes * group_bytes; g < offset + size; g += group_bytes) {
        const uint8_t * grp = (const uint8_t *)t->data + g;
        for (int r = 0; r < R8; ++r) r8_row_to_file(t->type, grp, r, 0, nb, tmp.get() + (size_t)r * row_bytes);
        const size_t lo = std::max(g, offset), hi = std::min(g + group_bytes, offset + size);
        std::memcpy((char *)data + (lo - offset), tmp.get() + (lo - g), hi - lo);
    }
    return true;
}

static bool repack_buffer_get_tensor(tsr_backend_buffer_t, const struct tsr_tensor * t, void * data, size_t offset, size_t size) {
    if (is_r8_repacked(t)) return r8_get(t, data, offset, size);
    if (t->view_src && is_r8_repacked(t->view_src)) return r8_get(t->view_src, data, offset + view_offset(t), size);
    std::memcpy(data, (const char *)t->data + offset, size);
    return true;
}

static void repack_buffer_free(tsr_backend_buffer_t buffer) {
    repack_buffer_ctx * c = (repack_buffer_ctx *)buffer->context;
    tsr_backend_buffer_free(c->host);
    delete c;
}
static void * repack_buffer_get_base(tsr_backend_buffer_t buffer) {
    return tsr_backend_buffer_get_base(((repack_buffer_ctx *)buffer->context)->host);
}
static bool repack_buffer_memset_tensor(tsr_backend_buffer_t buffer, struct tsr_tensor * t, uint8_t value, size_t offset, size_t size) {
    repack_buffer_ctx * c = (repack_buffer_ctx *)buffer->context;
    const bool was_repacked = is_r8_repacked(t);
    r8_unpack(c, t);
    std::memset((char *)t->data + offset, value, size);
    if (was_repacked) r8_pack(c, t);
    return true;
}
/* A buffer of one byte value reads the same in either layout (a group is a permutation of
 * its bytes): repacked tensors stay marked. */
static void repack_buffer_clear(tsr_backend_buffer_t buffer, uint8_t value) {
    tsr_backend_buffer_clear(((repack_buffer_ctx *)buffer->context)->host, value);
}

/* the CPU buffer's, but for writes and reads, which know the layout */
static constexpr struct tsr_backend_buffer_i k_repack_buffer_i = [] {
    struct tsr_backend_buffer_i b = tsr_impl::k_cpu_buffer_i;
    b.free_buffer = repack_buffer_free;
    b.get_base = repack_buffer_get_base;
    b.memset_tensor = repack_buffer_memset_tensor;
    b.set_tensor = repack_buffer_set_tensor;
    b.get_tensor = repack_buffer_get_tensor;
    b.cpy_tensor = nullptr;  /* a copy into or out of a repack tensor goes through set / get */
    b.clear = repack_buffer_clear;
    return b;
}();

static const char * repack_buft_name(tsr_backend_buffer_type_t) { return "CPU_REPACK"; }
static tsr_backend_buffer_t repack_buft_alloc(tsr_backend_buffer_type_t buft, size_t size) {
    tsr_backend_buffer_t host = tsr_backend_buft_alloc_buffer(tsr_backend_cpu_buffer_type(), size);
    if (!host) return nullptr;
    repack_buffer_ctx * c = new (std::nothrow) repack_buffer_ctx();
    if (!c) { tsr_backend_buffer_free(host); tsr_set_error("CPU_REPACK buffer type: out of memory"); return nullptr; }
    c->host = host;
    tsr_backend_buffer_t b = tsr_backend_buffer_init(buft, k_repack_buffer_i, c, size);
    if (!b) { tsr_backend_buffer_free(host); delete c; }
    return b;
}
/* the CPU buffer type's alignment and host memory, its own name and buffers */
static constexpr struct tsr_backend_buffer_type_i k_repack_buft_i = [] {
    struct tsr_backend_buffer_type_i t = tsr_impl::k_cpu_buft_i;
    t.get_name = repack_buft_name;
    t.alloc_buffer = repack_buft_alloc;
    return t;
}();

} // namespace tcpu
} // namespace

TSR_API_IMPL tsr_backend_buffer_type_t tsr_backend_cpu_repack_buffer_type(void) {
    static struct tsr_backend_buffer_type buft = [] {
        struct tsr_backend_buffer_type t = {};
        t.iface = tcpu::k_repack_buft_i;
        return t;
    }();
    return &buft;
}

TSR_API_IMPL bool tsr_backend_cpu_repacks(const struct tsr_tensor * t) {
    return t && tcpu::r8_eligible(t);
}
