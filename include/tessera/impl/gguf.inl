/*
 * impl/gguf.inl - GGUF reader, writer and chunked tensor loader (C++17).
 * Pulled in by gguf.h under TSR_IMPLEMENTATION. See gguf.h for the API.
 *
 * Format (little-endian):
 *   "GGUF" u32 version u64 n_tensors u64 n_kv
 *   n_kv x  { str key, u32 type, value }          str = u64 len + bytes
 *   n_tensors x { str name, u32 n_dims, i64 ne[n_dims], u32 type, u64 offset }
 *   zero padding to `general.alignment` (default 32), then the data section;
 *   each tensor's offset is relative to the data section and aligned.
 *
 * Every count and length read from the file is checked against the bytes left before
 * anything is allocated, and everything a parse keeps (metadata, tensor headers of the
 * context, tensor data) is charged against a budget of 4 x the file size + 64 MiB first,
 * in every loading mode, so every mode accepts and rejects the same files.
 */
#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#define TSR_GGUF_POSIX_IO 1  /* pread for loading, mmap for mapping */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif


TSR_IMPL_NS_BEGIN
namespace gguf_detail {

struct kv {
    std::string key;
    tsr_gguf_type type = TSR_GGUF_TYPE_UINT8;
    tsr_gguf_type arr_type = TSR_GGUF_TYPE_UINT8;   /* for arrays */
    size_t n = 0;                                   /* array elements (1 for scalars) */
    std::vector<uint8_t> data;                      /* scalar or array of scalars, raw */
    std::vector<std::string> strs;                  /* string value (1) or string array */
};

struct tinfo {
    std::string name;
    tsr_type type = TSR_TYPE_F32;
    int n_dims = 1;
    int64_t ne[TSR_MAX_DIMS] = {1, 1, 1, 1};
    uint64_t offset = 0;   /* relative to the data section */
    size_t size = 0;       /* bytes (unpadded) */
    const tsr_tensor * src = nullptr;  /* writer: tensor to read data from */
    const void * data = nullptr;       /* host data, when known */
};

static inline size_t type_size(tsr_gguf_type t) {
    switch (t) {
        case TSR_GGUF_TYPE_UINT8: case TSR_GGUF_TYPE_INT8: case TSR_GGUF_TYPE_BOOL: return 1;
        case TSR_GGUF_TYPE_UINT16: case TSR_GGUF_TYPE_INT16: return 2;
        case TSR_GGUF_TYPE_UINT32: case TSR_GGUF_TYPE_INT32: case TSR_GGUF_TYPE_FLOAT32: return 4;
        case TSR_GGUF_TYPE_UINT64: case TSR_GGUF_TYPE_INT64: case TSR_GGUF_TYPE_FLOAT64: return 8;
        default: return 0;  /* STRING, ARRAY, unknown */
    }
}

static inline bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* n * per, or UINT64_MAX when it does not fit */
static inline uint64_t sat_mul(uint64_t n, uint64_t per) { return per != 0 && n > UINT64_MAX / per ? UINT64_MAX : n * per; }

/* Memory per key/value or tensor info beyond its struct (rounded up, so the budget holds
 * what the allocator really hands out): the duplicate check's hash set node and buckets,
 * the value's heap block with the allocator's header. */
static constexpr uint64_t k_entry_overhead = 128;
/* a string's heap block beyond its characters: the terminator, rounding, the allocator's header */
static constexpr uint64_t k_string_overhead = 32;
static constexpr uint64_t k_budget_slack = (uint64_t) 64 << 20;

/* A bounded little-endian reader over a FILE or a memory block. */
struct reader {
    const char * name = "";
    FILE * f = nullptr;
    const uint8_t * mem = nullptr;
    uint64_t size = 0;
    uint64_t pos = 0;
    uint64_t budget_left = 0;   /* bytes of memory the parse may still commit (set by parse) */

    uint64_t remaining() const { return pos <= size ? size - pos : 0; }

    bool fail(uint64_t at, const char * fmt, ...) const
#if defined(__GNUC__) || defined(__clang__)
        __attribute__((format(printf, 3, 4)))
#endif
    {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        return tsr_set_error("gguf '%s': byte %llu: %s", name, (unsigned long long) at, msg);
    }

    bool raw(void * dst, uint64_t n, const char * what) {
        if (n > remaining()) {
            return fail(pos, "truncated file: %s needs %llu bytes, only %llu left (file size %llu)", what,
                        (unsigned long long) n, (unsigned long long) remaining(), (unsigned long long) size);
        }
        if (n == 0) return true;
        if (mem) {
            memcpy(dst, mem + pos, (size_t) n);
        } else if (fread(dst, 1, (size_t) n, f) != (size_t) n) {
            return fail(pos, "read error while reading %s (%s)", what, strerror(errno));
        }
        pos += n;
        return true;
    }
    template <typename T> bool get(T & v, const char * what) { return raw(&v, sizeof v, what); }

    /* Take `bytes` of memory from the budget before allocating them. */
    bool charge(uint64_t at, uint64_t bytes, const char * what) {
        if (bytes > budget_left) {
            return fail(at, "%s needs %llu bytes of memory, more than the %llu left of this file's parsing budget "
                        "(4 x its size of %llu + 64 MiB)", what, (unsigned long long) bytes,
                        (unsigned long long) budget_left, (unsigned long long) size);
        }
        budget_left -= bytes;
        return true;
    }

    bool str(std::string & s, const char * what) {
        uint64_t at = pos, len = 0;
        if (!get(len, what)) return false;
        if (len > remaining()) {
            return fail(at, "%s: string length %llu exceeds the %llu bytes left in the file", what,
                        (unsigned long long) len, (unsigned long long) remaining());
        }
        if (!charge(at, len + k_string_overhead, what)) return false;
        try { s.resize((size_t) len); } catch (...) { return fail(at, "%s: out of memory for %llu bytes", what, (unsigned long long) len); }
        return raw(len ? &s[0] : nullptr, len, what);
    }
};

static inline const char * type_name(tsr_gguf_type t) {
    static const char * names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return (unsigned) t < TSR_GGUF_TYPE_COUNT ? names[t] : "unknown";
}

/* Names of ggml tensor types tessera does not implement (for error messages). */
static inline const char * ggml_type_name(uint32_t t) {
    switch (t) {
        case 3: return "Q4_1"; case 6: return "Q5_0"; case 7: return "Q5_1"; case 9: return "Q8_1";
        case 10: return "Q2_K"; case 11: return "Q3_K"; case 12: return "Q4_K"; case 13: return "Q5_K";
        case 14: return "Q6_K"; case 15: return "Q8_K"; case 16: return "IQ2_XXS"; case 17: return "IQ2_XS";
        case 18: return "IQ3_XXS"; case 19: return "IQ1_S"; case 20: return "IQ4_NL"; case 21: return "IQ3_S";
        case 22: return "IQ2_S"; case 23: return "IQ4_XS"; case 24: return "I8"; case 25: return "I16";
        case 27: return "I64"; case 28: return "F64"; case 29: return "IQ1_M"; case 34: return "TQ1_0";
        case 35: return "TQ2_0"; case 39: return "MXFP4";
        default: return nullptr;
    }
}

/* Read one value (or array) of `type` into kv. */
static inline bool read_value(reader & r, kv & e, tsr_gguf_type type, const char * key) {
    char what[160];
    snprintf(what, sizeof what, "value of key '%.100s'", key);
    if (type == TSR_GGUF_TYPE_STRING) {
        e.n = 1;
        e.strs.resize(1);
        return r.str(e.strs[0], what);
    }
    if (type == TSR_GGUF_TYPE_ARRAY) {
        uint64_t at = r.pos;
        uint32_t at_type = 0;
        uint64_t n = 0;
        if (!r.get(at_type, what)) return false;
        if (at_type == TSR_GGUF_TYPE_ARRAY) return r.fail(at, "key '%s': arrays of arrays are not supported", key);
        if (at_type >= TSR_GGUF_TYPE_COUNT) return r.fail(at, "key '%s': unknown array element type %u", key, at_type);
        e.arr_type = (tsr_gguf_type) at_type;
        at = r.pos;
        if (!r.get(n, what)) return false;
        const uint64_t min_elem = at_type == TSR_GGUF_TYPE_STRING ? 8 : type_size(e.arr_type);
        if (n > r.remaining() / min_elem) {
            return r.fail(at, "key '%s': array of %llu %s elements needs at least %llu bytes per element, only %llu bytes left",
                          key, (unsigned long long) n, type_name(e.arr_type), (unsigned long long) min_elem,
                          (unsigned long long) r.remaining());
        }
        e.n = (size_t) n;
        const uint64_t elem_mem = at_type == TSR_GGUF_TYPE_STRING ? sizeof(std::string) : min_elem;
        if (!r.charge(at, sat_mul(n, elem_mem), what)) return false;
        if (at_type == TSR_GGUF_TYPE_STRING) {
            e.strs.resize(e.n);
            for (size_t i = 0; i < e.n; ++i) {
                if (!r.str(e.strs[i], what)) return false;
            }
            return true;
        }
        e.data.resize(e.n * min_elem);
        return r.raw(e.data.data(), e.data.size(), what);
    }
    const size_t sz = type_size(type);
    e.n = 1;
    e.data.resize(sz);
    return r.raw(e.data.data(), sz, what);
}

/* bytes of a tensor with this type and shape; false on a ragged row or when its size or a
 * stride of its contiguous layout overflows (a dimension of 0 empties the tensor but does
 * not shorten the strides tsr_new_tensor computes from the others) */
static inline bool tensor_bytes(tsr_type type, const int64_t * ne, size_t & out) {
    const int64_t bs = tsr_blck_size(type);
    const size_t ts = tsr_type_size(type);
    if (bs <= 0 || ts == 0 || ne[0] % bs != 0) return false;
    uint64_t extent = ts;  /* the product with every dimension counted as at least 1 */
    bool empty = false;
    for (int i = 0; i < TSR_MAX_DIMS; ++i) {
        const uint64_t n = (uint64_t) (i == 0 ? ne[0] / bs : ne[i]);
        empty = empty || n == 0;
        if (n > 1 && extent > (uint64_t) SIZE_MAX / n) return false;
        extent *= n > 1 ? n : 1;
    }
    out = empty ? 0 : (size_t) extent;
    return true;
}

static inline bool seek(FILE * f, uint64_t off) {
#ifdef _WIN32
    return _fseeki64(f, (long long) off, SEEK_SET) == 0;
#else
    return fseeko(f, (off_t) off, SEEK_SET) == 0;
#endif
}

static inline bool file_size(FILE * f, uint64_t & size) {
#ifdef _WIN32
    if (_fseeki64(f, 0, SEEK_END) != 0) return false;
    long long s = _ftelli64(f);
#else
    if (fseeko(f, 0, SEEK_END) != 0) return false;
    off_t s = ftello(f);
#endif
    if (s < 0) return false;
    size = (uint64_t) s;
    return seek(f, 0);
}

} // namespace gguf_detail

TSR_IMPL_HANDLE(tsr_gguf_context, gguf_ctx)

struct gguf_ctx {
    uint32_t version = TSR_GGUF_VERSION;
    size_t alignment = TSR_GGUF_DEFAULT_ALIGNMENT;
    size_t data_offset = 0;   /* read: where the data section starts in the file */
    bool from_file = false;
    std::vector<gguf_detail::kv> kvs;
    std::vector<gguf_detail::tinfo> infos;
};

namespace gguf_detail {

static inline size_t pad(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* writer: lay tensors out back to back, each padded to the alignment */
static inline void relayout(gguf_ctx * ctx) {
    size_t off = 0;
    for (auto & ti : ctx->infos) {
        ti.offset = off;
        off += pad(ti.size, ctx->alignment);
    }
}

static inline size_t data_size(const gguf_ctx * ctx) {
    size_t end = 0;
    for (auto & ti : ctx->infos) end = std::max(end, (size_t) ti.offset + pad(ti.size, ctx->alignment));
    return end;
}

/* "n * per" for a message, without wrapping: the product, or "more than 2^64". */
struct num_str { char s[32]; };
static inline num_str product_str(uint64_t n, uint64_t per) {
    num_str o;
    if (per != 0 && n > UINT64_MAX / per) snprintf(o.s, sizeof o.s, "more than 2^64");
    else snprintf(o.s, sizeof o.s, "%llu", (unsigned long long) (n * per));
    return o;
}

/* parse, step 1: magic, version and the two counts (each checked against the bytes left). */
static inline bool parse_header(reader & r, gguf_ctx * ctx, uint64_t & n_tensors, uint64_t & n_kv) {
    char magic[4];
    if (!r.raw(magic, 4, "magic")) return false;
    if (memcmp(magic, TSR_GGUF_MAGIC, 4) != 0) {
        return r.fail(0, "bad magic %02x %02x %02x %02x (expected \"GGUF\"): not a GGUF file",
                      (uint8_t) magic[0], (uint8_t) magic[1], (uint8_t) magic[2], (uint8_t) magic[3]);
    }
    uint32_t version = 0;
    if (!r.get(version, "version")) return false;
    if ((version & 0xFFFFu) == 0 && version != 0) {
        return r.fail(4, "version 0x%08x looks byte-swapped: big-endian GGUF files are not supported", version);
    }
    if (version == 1) return r.fail(4, "GGUF version 1 is not supported (only 2 and 3)");
    if (version < 2 || version > TSR_GGUF_VERSION) {
        return r.fail(4, "unsupported GGUF version %u (supported: 2 and 3)", version);
    }
    ctx->version = version;

    const uint64_t at_nt = r.pos;
    if (!r.get(n_tensors, "tensor count")) return false;
    const uint64_t at_nkv = r.pos;
    if (!r.get(n_kv, "key/value count")) return false;
    /* smallest possible kv: key len(8) + 1 byte key + type(4) + 1 byte value */
    if (n_kv > r.remaining() / 14) {
        return r.fail(at_nkv, "key/value count %llu needs at least %s bytes (14 each), only %llu left in the file",
                      (unsigned long long) n_kv, product_str(n_kv, 14).s, (unsigned long long) r.remaining());
    }
    /* smallest possible tensor info: name(8+1) n_dims(4) ne(8) type(4) offset(8) */
    if (n_tensors > r.remaining() / 33) {
        return r.fail(at_nt, "tensor count %llu needs at least %s bytes (33 each), only %llu left in the file",
                      (unsigned long long) n_tensors, product_str(n_tensors, 33).s, (unsigned long long) r.remaining());
    }
    return true;
}

/* parse, step 2: the n_kv key/value pairs (unique, non-empty keys; general.alignment checked). */
static inline bool parse_kvs(reader & r, gguf_ctx * ctx, uint64_t n_kv) {
    if (!r.charge(r.pos, sat_mul(n_kv, sizeof(kv) + k_entry_overhead), "the key/value table")) return false;
    ctx->kvs.reserve((size_t) n_kv);  /* no reallocation below: `seen` may point into the elements */
    std::unordered_set<std::string_view> seen;  /* duplicate check in O(1), not O(n) per key */
    for (uint64_t i = 0; i < n_kv; ++i) {
        kv e;
        const uint64_t at = r.pos;
        if (!r.str(e.key, "key")) return false;
        if (e.key.empty()) return r.fail(at, "key %llu is empty", (unsigned long long) i);
        if (memchr(e.key.data(), 0, e.key.size())) return r.fail(at, "key %llu contains a NUL byte", (unsigned long long) i);
        if (seen.count(std::string_view(e.key))) {
            return r.fail(at, "duplicate key '%s' (key %llu)", e.key.c_str(), (unsigned long long) i);
        }
        uint32_t type = 0;
        const uint64_t at_t = r.pos;
        if (!r.get(type, "value type")) return false;
        if (type >= TSR_GGUF_TYPE_COUNT) return r.fail(at_t, "key '%s': unknown value type %u", e.key.c_str(), type);
        e.type = (tsr_gguf_type) type;
        if (!read_value(r, e, e.type, e.key.c_str())) return false;
        if (e.key == TSR_GGUF_KEY_GENERAL_ALIGNMENT) {
            if (e.type != TSR_GGUF_TYPE_UINT32) return r.fail(at, "general.alignment has type %s, expected u32", type_name(e.type));
            uint32_t a = 0;
            memcpy(&a, e.data.data(), 4);
            if (!is_pow2(a)) return r.fail(at, "general.alignment %u is not a power of two", a);
            ctx->alignment = a;
        }
        ctx->kvs.push_back(std::move(e));
        seen.insert(std::string_view(ctx->kvs.back().key));
    }
    return true;
}

/* parse, step 3 (one tensor): the info of tensor i (name not in seen, shape, type, aligned offset). */
static inline bool parse_tensor_info(reader & r, const gguf_ctx * ctx, uint64_t i,
                                     const std::unordered_set<std::string_view> & seen, tinfo & ti) {
    const uint64_t at = r.pos;
    if (!r.str(ti.name, "tensor name")) return false;
    if (ti.name.empty()) return r.fail(at, "tensor %llu has an empty name", (unsigned long long) i);
    if (ti.name.size() >= TSR_MAX_NAME || memchr(ti.name.data(), 0, ti.name.size())) {
        return r.fail(at, "tensor %llu: name of %zu bytes is longer than %d or contains NUL", (unsigned long long) i,
                      ti.name.size(), TSR_MAX_NAME - 1);
    }
    if (seen.count(std::string_view(ti.name))) {
        return r.fail(at, "duplicate tensor name '%s' (tensor %llu)", ti.name.c_str(), (unsigned long long) i);
    }
    uint32_t n_dims = 0;
    const uint64_t at_nd = r.pos;
    if (!r.get(n_dims, "tensor n_dims")) return false;
    if (n_dims < 1 || n_dims > TSR_MAX_DIMS) {
        return r.fail(at_nd, "tensor '%s': n_dims %u out of range [1, %d]", ti.name.c_str(), n_dims, TSR_MAX_DIMS);
    }
    ti.n_dims = (int) n_dims;
    for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t at_ne = r.pos;
        if (!r.get(ti.ne[d], "tensor dimension")) return false;
        if (ti.ne[d] < 0) return r.fail(at_ne, "tensor '%s': ne[%u] = %lld is negative", ti.name.c_str(), d, (long long) ti.ne[d]);
        if (ti.ne[d] > TSR_IMPL_MAX_NE) {
            return r.fail(at_ne, "tensor '%s': ne[%u] = %lld exceeds the largest dimension %lld (2^56)", ti.name.c_str(), d,
                          (long long) ti.ne[d], (long long) TSR_IMPL_MAX_NE);
        }
    }
    uint32_t type = 0;
    const uint64_t at_ty = r.pos;
    if (!r.get(type, "tensor type")) return false;
    if (type >= (uint32_t) TSR_TYPE_COUNT || !tsr_is_valid_type((tsr_type) type)) {  /* range first: an out-of-range enum value is UB */
        const char * gn = ggml_type_name(type);
        if (gn) {
            return r.fail(at_ty, "tensor '%s': ggml type %u (%s) is not supported by tessera (F32, F16, BF16, I32, Q4_0, Q4_1, Q5_0, Q5_1,"
                          " Q8_0, Q2_K..Q6_K and IQ4_NL are; e.g. re-quantize with llama-quantize to Q4_K_M or Q8_0): unknown tensor type %u", ti.name.c_str(), type, gn, type);
        }
        return r.fail(at_ty, "tensor '%s': unknown tensor type %u", ti.name.c_str(), type);
    }
    ti.type = (tsr_type) type;
    if (!tensor_bytes(ti.type, ti.ne, ti.size)) {
        return r.fail(at_nd, "tensor '%s': shape [%lld, %lld, %lld, %lld] of type %s overflows or has a row not a multiple of the block size %lld",
                      ti.name.c_str(), (long long) ti.ne[0], (long long) ti.ne[1], (long long) ti.ne[2], (long long) ti.ne[3],
                      tsr_type_name(ti.type), (long long) tsr_blck_size(ti.type));
    }
    const uint64_t at_off = r.pos;
    if (!r.get(ti.offset, "tensor offset")) return false;
    if (ti.offset % ctx->alignment != 0) {
        return r.fail(at_off, "tensor '%s': data offset %llu is not a multiple of the alignment %zu", ti.name.c_str(),
                      (unsigned long long) ti.offset, ctx->alignment);
    }
    return true;
}

/* parse, step 3: the n_tensors tensor infos, names unique. */
static inline bool parse_tensor_infos(reader & r, gguf_ctx * ctx, uint64_t n_tensors) {
    /* the headers of the tensors a context would hold are charged in every mode, so a file
     * that loads in one mode loads in all */
    const uint64_t per_tensor = sizeof(tinfo) + k_entry_overhead + tsr_tensor_overhead() + TSR_MEM_ALIGN;
    if (!r.charge(r.pos, sat_mul(n_tensors, per_tensor), "the tensor table")) return false;
    ctx->infos.reserve((size_t) n_tensors);  /* no reallocation below: `seen` points into the elements */
    std::unordered_set<std::string_view> seen;
    for (uint64_t i = 0; i < n_tensors; ++i) {
        tinfo ti;
        if (!parse_tensor_info(r, ctx, i, seen, ti)) return false;
        ctx->infos.push_back(std::move(ti));
        seen.insert(std::string_view(ctx->infos.back().name));
    }
    return true;
}

/* parse, step 4: where the data section starts; every tensor's data inside the file, no two overlapping. */
static inline bool check_data_section(reader & r, gguf_ctx * ctx) {
    ctx->data_offset = (size_t) pad((size_t) r.pos, ctx->alignment);
    if (!ctx->infos.empty() && ctx->data_offset > r.size) {
        return r.fail(r.pos, "the data section of %zu tensors starts at byte %zu (the metadata's end padded to the alignment %zu), "
                      "past the end of the file (size %llu)", ctx->infos.size(), ctx->data_offset, ctx->alignment,
                      (unsigned long long) r.size);
    }
    const uint64_t data_avail = r.size > ctx->data_offset ? r.size - ctx->data_offset : 0;
    for (size_t i = 0; i < ctx->infos.size(); ++i) {
        const tinfo & ti = ctx->infos[i];
        if (ti.offset > data_avail || ti.size > data_avail - ti.offset) {
            /* the offset may be near 2^64: name the size, not an end that would wrap */
            return r.fail(ctx->data_offset > UINT64_MAX - ti.offset ? ctx->data_offset : ctx->data_offset + ti.offset,
                          "tensor '%s': %llu bytes of data at offset %llu (relative to the data section at byte %zu) "
                          "run past the end of the file (size %llu)",
                          ti.name.c_str(), (unsigned long long) ti.size, (unsigned long long) ti.offset,
                          ctx->data_offset, (unsigned long long) r.size);
        }
    }
    /* No two tensors' data may overlap: sweep all ranges in offset order against the
     * furthest end seen so far (not only neighbours: a zero-size tensor between two
     * overlapping ones must not hide them). Every end is inside the file here. */
    std::vector<size_t> order(ctx->infos.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ctx->infos[a].offset < ctx->infos[b].offset; });
    const tinfo * furthest = nullptr;
    for (size_t k : order) {
        const tinfo & b = ctx->infos[k];
        if (b.size == 0) continue;
        if (furthest && b.offset < furthest->offset + furthest->size) {
            const tinfo & a = *furthest;
            return r.fail(ctx->data_offset + b.offset, "tensor '%s' data [%llu, %llu) overlaps tensor '%s' data [%llu, %llu)",
                          b.name.c_str(), (unsigned long long) b.offset, (unsigned long long) (b.offset + b.size),
                          a.name.c_str(), (unsigned long long) a.offset, (unsigned long long) (a.offset + a.size));
        }
        if (!furthest || b.offset + b.size > furthest->offset + furthest->size) furthest = &b;
    }
    /* disjoint and inside the file: the sum cannot overflow */
    uint64_t data_bytes = 0;
    for (const tinfo & ti : ctx->infos) data_bytes += ti.size;
    return r.charge(ctx->data_offset, data_bytes, "the tensor data");
}

/* parse, step 5 (params.ctx): a tsr_context with one tensor per info, holding its data unless
 * no_alloc. tctx is set as soon as it exists (the caller frees it on failure). meta_end: where
 * the metadata ended (the byte errors name). */
static inline bool load_context(reader & r, gguf_ctx * ctx, tsr_gguf_init_params params, uint64_t meta_end,
                                tsr_context *& tctx) {
    size_t mem = (ctx->infos.size() + 1) * tsr_tensor_overhead();
    if (!params.no_alloc) {
        for (auto & ti : ctx->infos) mem += pad(ti.size, TSR_MEM_ALIGN);
    }
    tctx = tsr_init(tsr_init_params{mem, nullptr, params.no_alloc});
    char why[sizeof tsr_impl::g_error];  /* a copy (the next error overwrites it); no std::string: nothing may throw */
    if (!tctx) {
        snprintf(why, sizeof why, "%s", tsr_last_error());
        return r.fail(meta_end, "cannot create a context of %zu bytes for %zu tensors: %s", mem, ctx->infos.size(), why);
    }
    for (auto & ti : ctx->infos) {
        tsr_tensor * t = tsr_new_tensor(tctx, ti.type, TSR_MAX_DIMS, ti.ne);
        if (!t) {
            snprintf(why, sizeof why, "%s", tsr_last_error());
            return r.fail(meta_end, "cannot create tensor '%s': %s", ti.name.c_str(), why);
        }
        tsr_set_name(t, ti.name.c_str());
        if (params.no_alloc) continue;
        if (r.mem) {
            memcpy(t->data, r.mem + ctx->data_offset + ti.offset, ti.size);
        } else {
            r.pos = ctx->data_offset + ti.offset;
            if (!seek(r.f, r.pos)) return r.fail(r.pos, "seek failed");
            char what[128];
            snprintf(what, sizeof what, "data of tensor '%s'", ti.name.c_str());
            if (!r.raw(t->data, ti.size, what)) return false;
        }
        ti.data = t->data;
    }
    return true;
}

static inline gguf_ctx * parse(reader & r, tsr_gguf_init_params params) {
    if (params.ctx) *params.ctx = nullptr;
    gguf_ctx * ctx = nullptr;
    tsr_context * tctx = nullptr;
    try {
        r.budget_left = r.size > (UINT64_MAX - k_budget_slack) / 4 ? UINT64_MAX : 4 * r.size + k_budget_slack;
        ctx = new gguf_ctx();
        ctx->from_file = true;
        uint64_t n_tensors = 0, n_kv = 0;
        bool ok = parse_header(r, ctx, n_tensors, n_kv) && parse_kvs(r, ctx, n_kv) &&
                  parse_tensor_infos(r, ctx, n_tensors);
        const uint64_t meta_end = r.pos;
        ok = ok && check_data_section(r, ctx);
        if (ok && params.ctx) {
            ok = load_context(r, ctx, params, meta_end, tctx);
            if (ok) *params.ctx = tctx;
        } else if (ok && !params.no_alloc && r.mem) {
            for (auto & ti : ctx->infos) ti.data = r.mem + ctx->data_offset + ti.offset;  /* caller's memory */
        }
        if (ok) return ctx;
        delete ctx;
        tsr_free(tctx);
        return nullptr;
    } catch (const std::bad_alloc &) {
        delete ctx;
        tsr_free(tctx);
        if (params.ctx) *params.ctx = nullptr;
        r.fail(r.pos, "out of memory");
        return nullptr;
    } catch (...) {
        delete ctx;
        tsr_free(tctx);
        if (params.ctx) *params.ctx = nullptr;
        r.fail(r.pos, "unexpected error");
        return nullptr;
    }
}

static inline bool check_kv(const gguf_ctx * ctx, int64_t id, tsr_gguf_type want, const char * fn) {
    if (!ctx) return tsr_set_error("%s: NULL gguf context", fn);
    if (id < 0 || id >= (int64_t) ctx->kvs.size()) {
        return tsr_set_error("%s: key id %lld out of range [0, %zu)", fn, (long long) id, ctx->kvs.size());
    }
    const kv & e = ctx->kvs[(size_t) id];
    if (want != TSR_GGUF_TYPE_COUNT && e.type != want) {
        return tsr_set_error("%s: key '%s' has type %s, not %s", fn, e.key.c_str(), type_name(e.type), type_name(want));
    }
    return true;
}

template <typename T>
static inline T get_scalar(const gguf_ctx * ctx, int64_t id, tsr_gguf_type want, const char * fn) {
    T v{};
    if (!check_kv(ctx, id, want, fn)) return v;
    memcpy(&v, ctx->kvs[(size_t) id].data.data(), sizeof v);
    return v;
}

static inline bool check_tensor(const gguf_ctx * ctx, int64_t id, const char * fn) {
    if (!ctx) return tsr_set_error("%s: NULL gguf context", fn);
    if (id < 0 || id >= (int64_t) ctx->infos.size()) {
        return tsr_set_error("%s: tensor id %lld out of range [0, %zu)", fn, (long long) id, ctx->infos.size());
    }
    return true;
}

/* find or append the key's entry (cleared) */
static inline kv * put(gguf_ctx * ctx, const char * key, const char * fn) {
    if (!ctx) { tsr_set_error("%s: NULL gguf context", fn); return nullptr; }
    if (!key || !*key) { tsr_set_error("%s: NULL or empty key", fn); return nullptr; }
    try {
        for (auto & e : ctx->kvs) {
            if (e.key == key) {
                e.data.clear();
                e.strs.clear();
                e.n = 0;
                return &e;
            }
        }
        ctx->kvs.emplace_back();
        try { ctx->kvs.back().key = key; } catch (...) { ctx->kvs.pop_back(); throw; }
        return &ctx->kvs.back();
    } catch (...) {
        tsr_set_error("%s: out of memory", fn);
        return nullptr;
    }
}

/* Remove an entry that put() returned and that could not be filled (out of memory): a
 * half-written value (e.g. a string key with no string) must not stay readable. */
static inline void drop_kv(gguf_ctx * ctx, kv * e) {
    const bool was_align = e->key == TSR_GGUF_KEY_GENERAL_ALIGNMENT;
    ctx->kvs.erase(ctx->kvs.begin() + (e - ctx->kvs.data()));
    if (was_align) {
        ctx->alignment = TSR_GGUF_DEFAULT_ALIGNMENT;
        relayout(ctx);
    }
}

static inline bool set_scalar(gguf_ctx * ctx, const char * key, tsr_gguf_type type, const void * v, const char * fn) {
    const bool is_align = key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0;
    uint32_t align = 0;
    if (is_align) {
        if (type != TSR_GGUF_TYPE_UINT32) return tsr_set_error("%s: general.alignment must be u32, not %s", fn, type_name(type));
        memcpy(&align, v, 4);
        if (!is_pow2(align)) return tsr_set_error("%s: general.alignment %u is not a power of two", fn, align);
    }
    kv * e = put(ctx, key, fn);
    if (!e) return false;
    try {
        e->type = type;
        e->n = 1;
        e->data.assign((const uint8_t *) v, (const uint8_t *) v + type_size(type));
    } catch (...) { drop_kv(ctx, e); return tsr_set_error("%s: out of memory", fn); }
    if (is_align) {
        ctx->alignment = align;
        relayout(ctx);
    }
    return true;
}

/* buffered writer with sticky error */
/* writes to a FILE or to memory, with a sticky error and a byte count */
struct writer {
    FILE * f = nullptr;
    uint8_t * mem = nullptr;
    size_t pos = 0;
    bool ok = true;
    void raw(const void * p, size_t n) {
        if (!ok || !n) return;
        if (mem) memcpy(mem + pos, p, n);
        else if (fwrite(p, 1, n, f) != n) ok = false;
        pos += n;
    }
    template <typename T> void put(T v) { raw(&v, sizeof v); }
    void str(const std::string & s) { put((uint64_t) s.size()); raw(s.data(), s.size()); }
    void zeros(size_t n) {
        static const uint8_t z[64] = {0};
        while (n) { size_t k = n < 64 ? n : 64; raw(z, k); n -= k; }
    }
};

/* header, metadata, tensor infos, padding to the alignment (= meta_size bytes) */
static inline void write_meta(const gguf_ctx * ctx, writer & w) {
    w.raw(TSR_GGUF_MAGIC, 4);
    w.put((uint32_t) TSR_GGUF_VERSION);
    w.put((uint64_t) ctx->infos.size());
    w.put((uint64_t) ctx->kvs.size());
    for (auto & e : ctx->kvs) {
        w.str(e.key);
        w.put((uint32_t) e.type);
        if (e.type == TSR_GGUF_TYPE_STRING) {
            w.str(e.strs[0]);
        } else if (e.type == TSR_GGUF_TYPE_ARRAY) {
            w.put((uint32_t) e.arr_type);
            w.put((uint64_t) e.n);
            if (e.arr_type == TSR_GGUF_TYPE_STRING) {
                for (auto & s : e.strs) w.str(s);
            } else {
                w.raw(e.data.data(), e.data.size());
            }
        } else {
            w.raw(e.data.data(), e.data.size());
        }
    }
    for (auto & ti : ctx->infos) {
        w.str(ti.name);
        w.put((uint32_t) ti.n_dims);
        for (int d = 0; d < ti.n_dims; ++d) w.put((int64_t) ti.ne[d]);
        w.put((uint32_t) ti.type);
        w.put((uint64_t) ti.offset);
    }
    w.zeros(pad(w.pos, ctx->alignment) - w.pos);
}

static inline size_t meta_size(const gguf_ctx * ctx) {
    size_t s = 4 + 4 + 8 + 8;
    for (auto & e : ctx->kvs) {
        s += 8 + e.key.size() + 4;
        if (e.type == TSR_GGUF_TYPE_ARRAY) s += 4 + 8;
        if (e.type == TSR_GGUF_TYPE_STRING || (e.type == TSR_GGUF_TYPE_ARRAY && e.arr_type == TSR_GGUF_TYPE_STRING)) {
            for (auto & str : e.strs) s += 8 + str.size();
        } else {
            s += e.data.size();
        }
    }
    for (auto & ti : ctx->infos) s += 8 + ti.name.size() + 4 + 8 * (size_t) ti.n_dims + 4 + 8;
    return pad(s, ctx->alignment);
}

static inline bool host_readable(const tsr_tensor * t) {
    return t->data && (!t->buffer || tsr_backend_buffer_is_host(t->buffer));
}

} // namespace gguf_detail
TSR_IMPL_NS_END

/* ---- API ---------------------------------------------------------------------------- */

TSR_API_IMPL struct tsr_gguf_context * tsr_gguf_init_empty(void) {
    tsr_impl::gguf_ctx * ctx = new (std::nothrow) tsr_impl::gguf_ctx();
    if (!ctx) tsr_set_error("tsr_gguf_init_empty: out of memory");
    return tsr_impl::handle(ctx);
}

TSR_API_IMPL struct tsr_gguf_context * tsr_gguf_init_from_file(const char * fname, struct tsr_gguf_init_params params) {
    using namespace tsr_impl::gguf_detail;
    if (params.ctx) *params.ctx = nullptr;
    if (!fname) { tsr_set_error("tsr_gguf_init_from_file: NULL file name"); return nullptr; }
    FILE * f = fopen(fname, "rb");
    if (!f) { tsr_set_error("gguf '%s': cannot open: %s", fname, strerror(errno)); return nullptr; }
    reader r;
    r.name = fname;
    r.f = f;
    if (!file_size(f, r.size)) {
        tsr_set_error("gguf '%s': cannot determine the file size: %s", fname, strerror(errno));
        fclose(f);
        return nullptr;
    }
    tsr_impl::gguf_ctx * ctx = parse(r, params);
    fclose(f);
    return tsr_impl::handle(ctx);
}

TSR_API_IMPL struct tsr_gguf_context * tsr_gguf_init_from_buffer(const void * data, size_t size, struct tsr_gguf_init_params params) {
    using namespace tsr_impl::gguf_detail;
    if (params.ctx) *params.ctx = nullptr;
    if (!data && size) { tsr_set_error("tsr_gguf_init_from_buffer: NULL data of %zu bytes", size); return nullptr; }
    static const uint8_t empty = 0;
    reader r;
    r.name = "<memory>";
    r.mem = data ? (const uint8_t *) data : &empty;
    r.size = size;
    return tsr_impl::handle(parse(r, params));
}

TSR_API_IMPL void tsr_gguf_free(struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); delete ctx; }

TSR_API_IMPL const char * tsr_gguf_type_name(enum tsr_gguf_type type) { return tsr_impl::gguf_detail::type_name(type); }
TSR_API_IMPL uint32_t tsr_gguf_get_version(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? ctx->version : 0; }
TSR_API_IMPL size_t tsr_gguf_get_alignment(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? ctx->alignment : 0; }
TSR_API_IMPL size_t tsr_gguf_get_data_offset(const struct tsr_gguf_context * ctx_h) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx) return 0;
    return ctx->from_file ? ctx->data_offset : tsr_impl::gguf_detail::meta_size(ctx);
}
TSR_API_IMPL size_t tsr_gguf_get_data_size(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? tsr_impl::gguf_detail::data_size(ctx) : 0; }
TSR_API_IMPL size_t tsr_gguf_get_meta_size(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? tsr_impl::gguf_detail::meta_size(ctx) : 0; }
TSR_API_IMPL void tsr_gguf_get_meta_data(const struct tsr_gguf_context * ctx_h, void * data) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx || !data) return;
    tsr_impl::gguf_detail::writer w;
    w.mem = (uint8_t *) data;
    tsr_impl::gguf_detail::write_meta(ctx, w);
}

TSR_API_IMPL int64_t tsr_gguf_get_n_kv(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? (int64_t) ctx->kvs.size() : 0; }
TSR_API_IMPL int64_t tsr_gguf_find_key(const struct tsr_gguf_context * ctx_h, const char * key) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx || !key) return -1;
    for (size_t i = 0; i < ctx->kvs.size(); ++i) {
        if (ctx->kvs[i].key == key) return (int64_t) i;
    }
    return -1;
}
TSR_API_IMPL const char * tsr_gguf_get_key(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_COUNT, "tsr_gguf_get_key")) return nullptr;
    return ctx->kvs[(size_t) key_id].key.c_str();
}
TSR_API_IMPL enum tsr_gguf_type tsr_gguf_get_kv_type(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_COUNT, "tsr_gguf_get_kv_type")) return TSR_GGUF_TYPE_COUNT;
    return ctx->kvs[(size_t) key_id].type;
}
TSR_API_IMPL enum tsr_gguf_type tsr_gguf_get_arr_type(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_type")) return TSR_GGUF_TYPE_COUNT;
    return ctx->kvs[(size_t) key_id].arr_type;
}

#define TSR_GGUF_GETTER(suffix, T, TYPE) \
    TSR_API_IMPL T tsr_gguf_get_val_##suffix(const struct tsr_gguf_context * ctx_h, int64_t key_id) { auto * ctx = tsr_impl::internal(ctx_h); \
        return tsr_impl::gguf_detail::get_scalar<T>(ctx, key_id, TYPE, "tsr_gguf_get_val_" #suffix); \
    }
TSR_GGUF_GETTER(u8, uint8_t, TSR_GGUF_TYPE_UINT8)
TSR_GGUF_GETTER(i8, int8_t, TSR_GGUF_TYPE_INT8)
TSR_GGUF_GETTER(u16, uint16_t, TSR_GGUF_TYPE_UINT16)
TSR_GGUF_GETTER(i16, int16_t, TSR_GGUF_TYPE_INT16)
TSR_GGUF_GETTER(u32, uint32_t, TSR_GGUF_TYPE_UINT32)
TSR_GGUF_GETTER(i32, int32_t, TSR_GGUF_TYPE_INT32)
TSR_GGUF_GETTER(f32, float, TSR_GGUF_TYPE_FLOAT32)
TSR_GGUF_GETTER(u64, uint64_t, TSR_GGUF_TYPE_UINT64)
TSR_GGUF_GETTER(i64, int64_t, TSR_GGUF_TYPE_INT64)
TSR_GGUF_GETTER(f64, double, TSR_GGUF_TYPE_FLOAT64)
#undef TSR_GGUF_GETTER

TSR_API_IMPL bool tsr_gguf_get_val_bool(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    return tsr_impl::gguf_detail::get_scalar<uint8_t>(ctx, key_id, TSR_GGUF_TYPE_BOOL, "tsr_gguf_get_val_bool") != 0;
}
TSR_API_IMPL const char * tsr_gguf_get_val_str(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_STRING, "tsr_gguf_get_val_str")) return nullptr;
    return ctx->kvs[(size_t) key_id].strs[0].c_str();
}
TSR_API_IMPL const void * tsr_gguf_get_val_data(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!check_kv(ctx, key_id, TSR_GGUF_TYPE_COUNT, "tsr_gguf_get_val_data")) return nullptr;
    const kv & e = ctx->kvs[(size_t) key_id];
    if (e.type == TSR_GGUF_TYPE_STRING || e.type == TSR_GGUF_TYPE_ARRAY) {
        tsr_set_error("tsr_gguf_get_val_data: key '%s' is a %s, not a scalar", e.key.c_str(), type_name(e.type));
        return nullptr;
    }
    return e.data.data();
}
TSR_API_IMPL size_t tsr_gguf_get_arr_n(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_n")) return 0;
    return ctx->kvs[(size_t) key_id].n;
}
TSR_API_IMPL const void * tsr_gguf_get_arr_data(const struct tsr_gguf_context * ctx_h, int64_t key_id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_data")) return nullptr;
    const kv & e = ctx->kvs[(size_t) key_id];
    if (e.arr_type == TSR_GGUF_TYPE_STRING) {
        tsr_set_error("tsr_gguf_get_arr_data: key '%s' is an array of strings (use tsr_gguf_get_arr_str)", e.key.c_str());
        return nullptr;
    }
    return e.data.data();
}
TSR_API_IMPL const char * tsr_gguf_get_arr_str(const struct tsr_gguf_context * ctx_h, int64_t key_id, size_t i) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!check_kv(ctx, key_id, TSR_GGUF_TYPE_ARRAY, "tsr_gguf_get_arr_str")) return nullptr;
    const kv & e = ctx->kvs[(size_t) key_id];
    if (e.arr_type != TSR_GGUF_TYPE_STRING) {
        tsr_set_error("tsr_gguf_get_arr_str: key '%s' is an array of %s, not of strings", e.key.c_str(), type_name(e.arr_type));
        return nullptr;
    }
    if (i >= e.n) {
        tsr_set_error("tsr_gguf_get_arr_str: index %zu out of range for key '%s' (%zu elements)", i, e.key.c_str(), e.n);
        return nullptr;
    }
    return e.strs[i].c_str();
}

TSR_API_IMPL int64_t tsr_gguf_get_n_tensors(const struct tsr_gguf_context * ctx_h) { auto * ctx = tsr_impl::internal(ctx_h); return ctx ? (int64_t) ctx->infos.size() : 0; }
TSR_API_IMPL int64_t tsr_gguf_find_tensor(const struct tsr_gguf_context * ctx_h, const char * name) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!ctx || !name) return -1;
    for (size_t i = 0; i < ctx->infos.size(); ++i) {
        if (ctx->infos[i].name == name) return (int64_t) i;
    }
    return -1;
}
TSR_API_IMPL size_t tsr_gguf_get_tensor_offset(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_offset")) return 0;
    return (size_t) ctx->infos[(size_t) id].offset;
}
TSR_API_IMPL const char * tsr_gguf_get_tensor_name(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_name")) return nullptr;
    return ctx->infos[(size_t) id].name.c_str();
}
TSR_API_IMPL enum tsr_type tsr_gguf_get_tensor_type(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_type")) return TSR_TYPE_COUNT;
    return ctx->infos[(size_t) id].type;
}
TSR_API_IMPL size_t tsr_gguf_get_tensor_size(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_size")) return 0;
    return ctx->infos[(size_t) id].size;
}
TSR_API_IMPL int tsr_gguf_get_tensor_n_dims(const struct tsr_gguf_context * ctx_h, int64_t id) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_n_dims")) return 0;
    return ctx->infos[(size_t) id].n_dims;
}
TSR_API_IMPL int64_t tsr_gguf_get_tensor_ne(const struct tsr_gguf_context * ctx_h, int64_t id, int dim) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!tsr_impl::gguf_detail::check_tensor(ctx, id, "tsr_gguf_get_tensor_ne")) return 0;
    if (dim < 0 || dim >= TSR_MAX_DIMS) { tsr_set_error("tsr_gguf_get_tensor_ne: dim %d out of range", dim); return 0; }
    return ctx->infos[(size_t) id].ne[dim];
}

#define TSR_GGUF_SETTER(suffix, T, TYPE) \
    TSR_API_IMPL bool tsr_gguf_set_val_##suffix(struct tsr_gguf_context * ctx_h, const char * key, T val) { auto * ctx = tsr_impl::internal(ctx_h); \
        return tsr_impl::gguf_detail::set_scalar(ctx, key, TYPE, &val, "tsr_gguf_set_val_" #suffix); \
    }
TSR_GGUF_SETTER(u8, uint8_t, TSR_GGUF_TYPE_UINT8)
TSR_GGUF_SETTER(i8, int8_t, TSR_GGUF_TYPE_INT8)
TSR_GGUF_SETTER(u16, uint16_t, TSR_GGUF_TYPE_UINT16)
TSR_GGUF_SETTER(i16, int16_t, TSR_GGUF_TYPE_INT16)
TSR_GGUF_SETTER(u32, uint32_t, TSR_GGUF_TYPE_UINT32)
TSR_GGUF_SETTER(i32, int32_t, TSR_GGUF_TYPE_INT32)
TSR_GGUF_SETTER(f32, float, TSR_GGUF_TYPE_FLOAT32)
TSR_GGUF_SETTER(u64, uint64_t, TSR_GGUF_TYPE_UINT64)
TSR_GGUF_SETTER(i64, int64_t, TSR_GGUF_TYPE_INT64)
TSR_GGUF_SETTER(f64, double, TSR_GGUF_TYPE_FLOAT64)
#undef TSR_GGUF_SETTER

TSR_API_IMPL bool tsr_gguf_set_val_bool(struct tsr_gguf_context * ctx_h, const char * key, bool val) {
    auto * ctx = tsr_impl::internal(ctx_h);
    const uint8_t v = val ? 1 : 0;
    return tsr_impl::gguf_detail::set_scalar(ctx, key, TSR_GGUF_TYPE_BOOL, &v, "tsr_gguf_set_val_bool");
}
TSR_API_IMPL bool tsr_gguf_set_val_str(struct tsr_gguf_context * ctx_h, const char * key, const char * val) {
    auto * ctx = tsr_impl::internal(ctx_h);
    if (!val) return tsr_set_error("tsr_gguf_set_val_str: NULL value for key '%s'", key ? key : "(null)");
    if (key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) return tsr_set_error("tsr_gguf_set_val_str: general.alignment must be u32");
    tsr_impl::gguf_detail::kv * e = tsr_impl::gguf_detail::put(ctx, key, "tsr_gguf_set_val_str");
    if (!e) return false;
    try {
        e->type = TSR_GGUF_TYPE_STRING;
        e->n = 1;
        e->strs.assign(1, std::string(val));
    } catch (...) { tsr_impl::gguf_detail::drop_kv(ctx, e); return tsr_set_error("tsr_gguf_set_val_str: out of memory"); }
    return true;
}
TSR_API_IMPL bool tsr_gguf_set_arr_data(struct tsr_gguf_context * ctx_h, const char * key, enum tsr_gguf_type type, const void * data, size_t n) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    const size_t es = type_size(type);
    if (es == 0) return tsr_set_error("tsr_gguf_set_arr_data: key '%s': element type %s is not a scalar type", key ? key : "(null)", type_name(type));
    if (!data && n) return tsr_set_error("tsr_gguf_set_arr_data: key '%s': NULL data for %zu elements", key ? key : "(null)", n);
    if (n > SIZE_MAX / es) return tsr_set_error("tsr_gguf_set_arr_data: key '%s': %zu elements of %zu bytes overflow size_t", key ? key : "(null)", n, es);
    if (key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) return tsr_set_error("tsr_gguf_set_arr_data: general.alignment must be u32");
    kv * e = put(ctx, key, "tsr_gguf_set_arr_data");
    if (!e) return false;
    try {
        e->type = TSR_GGUF_TYPE_ARRAY;
        e->arr_type = type;
        e->n = n;
        e->data.assign((const uint8_t *) data, (const uint8_t *) data + n * es);
    } catch (...) { drop_kv(ctx, e); return tsr_set_error("tsr_gguf_set_arr_data: out of memory for %zu elements", n); }
    return true;
}
TSR_API_IMPL bool tsr_gguf_set_arr_str(struct tsr_gguf_context * ctx_h, const char * key, const char ** data, size_t n) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!data && n) return tsr_set_error("tsr_gguf_set_arr_str: key '%s': NULL data for %zu strings", key ? key : "(null)", n);
    for (size_t i = 0; i < n; ++i) {
        if (!data[i]) return tsr_set_error("tsr_gguf_set_arr_str: key '%s': string %zu is NULL", key ? key : "(null)", i);
    }
    if (key && strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) return tsr_set_error("tsr_gguf_set_arr_str: general.alignment must be u32");
    kv * e = put(ctx, key, "tsr_gguf_set_arr_str");
    if (!e) return false;
    try {
        e->type = TSR_GGUF_TYPE_ARRAY;
        e->arr_type = TSR_GGUF_TYPE_STRING;
        e->n = n;
        e->strs.assign(data, data + n);
    } catch (...) { drop_kv(ctx, e); return tsr_set_error("tsr_gguf_set_arr_str: out of memory for %zu strings", n); }
    return true;
}
TSR_API_IMPL int64_t tsr_gguf_remove_key(struct tsr_gguf_context * ctx_h, const char * key) {
    auto * ctx = tsr_impl::internal(ctx_h);
    const int64_t id = tsr_gguf_find_key(ctx_h, key);
    if (id >= 0) {
        ctx->kvs.erase(ctx->kvs.begin() + id);
        if (strcmp(key, TSR_GGUF_KEY_GENERAL_ALIGNMENT) == 0) {
            ctx->alignment = TSR_GGUF_DEFAULT_ALIGNMENT;
            tsr_impl::gguf_detail::relayout(ctx);
        }
    }
    return id;
}
TSR_API_IMPL bool tsr_gguf_set_kv(struct tsr_gguf_context * ctx_h, const struct tsr_gguf_context * src_h) {
    auto * ctx = tsr_impl::internal(ctx_h);
    auto * src = tsr_impl::internal(src_h);
    if (!ctx || !src) return tsr_set_error("tsr_gguf_set_kv: NULL context");
    for (auto & e : src->kvs) {
        tsr_impl::gguf_detail::kv * d = tsr_impl::gguf_detail::put(ctx, e.key.c_str(), "tsr_gguf_set_kv");
        if (!d) return false;
        try { *d = e; } catch (...) { tsr_impl::gguf_detail::drop_kv(ctx, d); return tsr_set_error("tsr_gguf_set_kv: out of memory"); }
        if (e.key == TSR_GGUF_KEY_GENERAL_ALIGNMENT) {
            uint32_t a = 0;
            memcpy(&a, e.data.data(), 4);
            ctx->alignment = a;
            tsr_impl::gguf_detail::relayout(ctx);
        }
    }
    return true;
}

TSR_API_IMPL bool tsr_gguf_add_tensor(struct tsr_gguf_context * ctx_h, const struct tsr_tensor * tensor) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!ctx || !tensor) return tsr_set_error("tsr_gguf_add_tensor: NULL argument");
    if (!tensor->name[0]) return tsr_set_error("tsr_gguf_add_tensor: tensor has no name");
    if (tsr_gguf_find_tensor(ctx_h, tensor->name) >= 0) return tsr_set_error("tsr_gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
    if (!tsr_is_contiguous(tensor)) return tsr_set_error("tsr_gguf_add_tensor: tensor '%s' is not contiguous", tensor->name);
    try {
        tinfo ti;
        ti.name = tensor->name;
        ti.type = tensor->type;
        ti.n_dims = std::max(1, tsr_n_dims(tensor));
        for (int d = 0; d < TSR_MAX_DIMS; ++d) ti.ne[d] = tensor->ne[d];
        ti.size = tsr_nbytes(tensor);
        ti.src = tensor;
        ctx->infos.push_back(ti);
    } catch (...) { return tsr_set_error("tsr_gguf_add_tensor: out of memory"); }
    relayout(ctx);
    return true;
}

TSR_API_IMPL bool tsr_gguf_set_tensor_data(struct tsr_gguf_context * ctx_h, const char * name, const void * data) {
    auto * ctx = tsr_impl::internal(ctx_h);
    const int64_t id = tsr_gguf_find_tensor(ctx_h, name);
    if (id < 0) return tsr_set_error("tsr_gguf_set_tensor_data: no tensor named '%s'", name ? name : "(null)");
    ctx->infos[(size_t) id].data = data;
    return true;
}

TSR_API_IMPL bool tsr_gguf_write_to_file(const struct tsr_gguf_context * ctx_h, const char * fname, bool only_meta) {
    auto * ctx = tsr_impl::internal(ctx_h);
    using namespace tsr_impl::gguf_detail;
    if (!ctx || !fname) return tsr_set_error("tsr_gguf_write_to_file: NULL argument");
    /* every tensor must have a data source before anything is written */
    if (!only_meta) {
        for (auto & ti : ctx->infos) {
            if (!ti.data && !(ti.src && (ti.src->data || ti.src->buffer))) {
                return tsr_set_error("tsr_gguf_write_to_file: tensor '%s' has no data to write", ti.name.c_str());
            }
        }
    }
    std::string tmp;
    try { tmp = std::string(fname) + ".tmp"; } catch (...) { return tsr_set_error("tsr_gguf_write_to_file: out of memory"); }
    FILE * f = fopen(tmp.c_str(), "wb");
    if (!f) return tsr_set_error("gguf '%s': cannot create: %s", tmp.c_str(), strerror(errno));
    writer w;
    w.f = f;
    write_meta(ctx, w);
    bool data_ok = true;
    if (!only_meta && w.ok) {
        std::vector<uint8_t> stage;
        for (auto & ti : ctx->infos) {
            if (ti.data) {
                w.raw(ti.data, ti.size);
            } else if (host_readable(ti.src)) {
                w.raw(ti.src->data, ti.size);
            } else {
                const size_t chunk = std::min<size_t>(ti.size, TSR_GGUF_LOAD_CHUNK);
                try { stage.resize(chunk); } catch (...) { data_ok = tsr_set_error("tsr_gguf_write_to_file: out of memory"); break; }
                for (size_t done = 0; done < ti.size && w.ok; done += chunk) {
                    const size_t k = std::min(chunk, ti.size - done);
                    if (!tsr_backend_tensor_get(ti.src, stage.data(), done, k)) { data_ok = false; break; }
                    w.raw(stage.data(), k);
                }
                if (!data_ok) break;
            }
            w.zeros(pad(ti.size, ctx->alignment) - ti.size);
        }
    }
    if (fclose(f) != 0) w.ok = false;
    if (!w.ok || !data_ok) {
        char why[sizeof tsr_impl::g_error];
        snprintf(why, sizeof why, "%s", data_ok ? strerror(errno) : tsr_last_error());
        remove(tmp.c_str());
        return tsr_set_error("gguf '%s': write failed: %s", fname, why);
    }
#ifdef _WIN32
    remove(fname);  /* rename over an existing file fails on Windows */
#endif
    if (rename(tmp.c_str(), fname) != 0) {
        const int e = errno;
        remove(tmp.c_str());
        return tsr_set_error("gguf '%s': cannot rename '%s' to it: %s", fname, tmp.c_str(), strerror(e));
    }
    return true;
}

TSR_IMPL_NS_BEGIN
namespace gguf_detail {

struct load_job { tsr_tensor * t; const tinfo * ti; };

/* Every tensor of ctx matched by name, type and shape to the file's, in file order (so the
 * reads run forward through the file); each one's data range checked against the file's size. */
static bool match_tensors(const gguf_ctx * gguf, const tsr_gguf_context * gguf_h, tsr_context * ctx, const char * path,
                          uint64_t fsize, std::vector<load_job> & jobs, size_t & total) {
    total = 0;
    for (tsr_tensor * t = tsr_get_first_tensor(ctx); t; t = tsr_get_next_tensor(ctx, t)) {
        const int64_t id = tsr_gguf_find_tensor(gguf_h, t->name);
        if (id < 0) return tsr_set_error("gguf '%s': tensor '%s' is not in the file", path, t->name);
        const tinfo & ti = gguf->infos[(size_t) id];
        bool same = ti.type == t->type;
        for (int d = 0; d < TSR_MAX_DIMS; ++d) same = same && ti.ne[d] == t->ne[d];
        if (!same) {
            return tsr_set_error("gguf '%s': tensor '%s' is %s [%lld, %lld, %lld, %lld] in the file but %s [%lld, %lld, %lld, %lld] in the context",
                                 path, t->name, tsr_type_name(ti.type), (long long) ti.ne[0], (long long) ti.ne[1],
                                 (long long) ti.ne[2], (long long) ti.ne[3], tsr_type_name(t->type), (long long) t->ne[0],
                                 (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3]);
        }
        const uint64_t off = (uint64_t) gguf->data_offset + ti.offset;
        if (off > fsize || ti.size > fsize - off) {
            return tsr_set_error("gguf '%s': byte %llu: tensor '%s' data of %zu bytes runs past the end of the file (size %llu)",
                                 path, (unsigned long long) off, ti.name.c_str(), ti.size, (unsigned long long) fsize);
        }
        jobs.push_back(load_job{t, &ti});
        total += ti.size;
    }
    std::sort(jobs.begin(), jobs.end(), [](const load_job & a, const load_job & b) { return a.ti->offset < b.ti->offset; });
    return true;
}

/* A read-only file handle that reads at absolute offsets: pread on POSIX (no seeks, no stdio
 * buffer between the page cache and the destination), stdio elsewhere. */
struct input_file {
#ifdef TSR_GGUF_POSIX_IO
    int fd = -1;
    bool open(const char * path) { fd = ::open(path, O_RDONLY | O_CLOEXEC); return fd >= 0; }
    bool size(uint64_t & out) const {
        struct stat st;
        if (fstat(fd, &st) != 0) return false;
        out = (uint64_t) st.st_size;
        return true;
    }
    void sequential(uint64_t off, uint64_t len) const {
#ifdef POSIX_FADV_SEQUENTIAL
        (void) posix_fadvise(fd, (off_t) off, (off_t) len, POSIX_FADV_SEQUENTIAL);
#else
        (void) off; (void) len;
#endif
    }
    bool read_at(void * dst, size_t n, uint64_t off) const {
        char * p = (char *) dst;
        while (n > 0) {
            const ssize_t k = pread(fd, p, n, (off_t) off);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) return false;
            p += k;
            n -= (size_t) k;
            off += (uint64_t) k;
        }
        return true;
    }
    ~input_file() { if (fd >= 0) ::close(fd); }
#else
    FILE * f = nullptr;
    bool open(const char * path) { f = fopen(path, "rb"); return f != nullptr; }
    bool size(uint64_t & out) const { return file_size(f, out); }
    void sequential(uint64_t, uint64_t) const {}
    bool read_at(void * dst, size_t n, uint64_t off) const { return seek(f, off) && fread(dst, 1, n, f) == n; }
    ~input_file() { if (f) fclose(f); }
#endif
};

/* Progress after each chunk: one call per 64 MiB read in place (8 MiB staged), nothing
 * next to the reads. */
struct progress_meter {
    tsr_gguf_progress_cb cb;
    void * user;
    size_t total, done = 0;
    bool add(size_t n) {
        done += n;
        return !cb || cb(done, total, user);
    }
};

/* Copy one tensor's bytes from the file: host memory is read into in place (large reads,
 * no copy), a device tensor through `stage` (bounded) and tsr_backend_tensor_set. */
static bool load_one(const input_file & in, const load_job & j, uint64_t off, std::vector<uint8_t> & stage, progress_meter & pm,
                     const char * path) {
    const bool host = host_readable(j.t);
    const size_t chunk = host ? (size_t) TSR_GGUF_LOAD_CHUNK * 8 : stage.size();
    for (size_t done = 0; done < j.ti->size;) {
        const size_t k = std::min<size_t>(j.ti->size - done, chunk);
        void * dst = host ? (void *) ((uint8_t *) j.t->data + done) : (void *) stage.data();
        if (!in.read_at(dst, k, off + done)) {
            return tsr_set_error("gguf '%s': byte %llu: short read for tensor '%s'", path, (unsigned long long) (off + done),
                                 j.ti->name.c_str());
        }
        if (!host && !tsr_backend_tensor_set(j.t, dst, done, k)) {
            char why[sizeof tsr_impl::g_error];  /* a copy (the next error overwrites it); no std::string: nothing may throw */
            snprintf(why, sizeof why, "%s", tsr_last_error());
            return tsr_set_error("gguf '%s': uploading tensor '%s' failed: %s", path, j.ti->name.c_str(), why);
        }
        done += k;
        if (!pm.add(k)) return tsr_set_error("gguf '%s': load cancelled after %zu of %zu bytes", path, pm.done, pm.total);
    }
    /* a host buffer with a set_tensor of its own (the CPU backend's CPU_REPACK) is told of
     * the bytes read in place, as if they had been set */
    const bool plain = !j.t->buffer || j.t->buffer->iface.set_tensor == tsr_impl::cpu_buffer_set_tensor;
    if (host && !plain && !tsr_backend_tensor_set(j.t, j.t->data, 0, j.ti->size)) {
        return tsr_set_error("gguf '%s': tensor '%s' read in place, then refused by its buffer", path, j.ti->name.c_str());
    }
    return true;
}

} // namespace gguf_detail
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_gguf_load_tensors(const struct tsr_gguf_context * gguf_h, struct tsr_context * ctx, const char * path,
                                        tsr_gguf_progress_cb progress, void * user) {
    using namespace tsr_impl::gguf_detail;
    auto * gguf = tsr_impl::internal(gguf_h);
    if (!gguf || !ctx || !path) return tsr_set_error("tsr_gguf_load_tensors: NULL argument");
    input_file in;
    if (!in.open(path)) return tsr_set_error("gguf '%s': cannot open: %s", path, strerror(errno));
    uint64_t fsize = 0;
    if (!in.size(fsize)) return tsr_set_error("gguf '%s': cannot determine the file size", path);
    std::vector<load_job> jobs;
    std::vector<uint8_t> stage;
    size_t total = 0, max_dev = 0;
    try {
        if (!match_tensors(gguf, gguf_h, ctx, path, fsize, jobs, total)) return false;
        for (const load_job & j : jobs) {
            if (!j.t->data) return tsr_set_error("gguf '%s': tensor '%s' has no memory yet (allocate the context's tensors in a buffer first)", path, j.t->name);
            if (!host_readable(j.t)) max_dev = std::max(max_dev, j.ti->size);
        }
        if (max_dev) stage.resize(std::min<size_t>(max_dev, TSR_GGUF_LOAD_CHUNK));
    } catch (...) {
        return tsr_set_error("tsr_gguf_load_tensors: out of memory");
    }
    in.sequential(gguf->data_offset, fsize - gguf->data_offset);
    progress_meter pm{progress, user, total};
    if (progress && !progress(0, total, user)) return tsr_set_error("gguf '%s': load cancelled", path);
    for (const load_job & j : jobs) {
        if (!load_one(in, j, (uint64_t) gguf->data_offset + j.ti->offset, stage, pm, path)) return false;
    }
    return true;
}

/* ---- mapping tensor data in place ---------------------------------------------------- */

TSR_IMPL_NS_BEGIN
namespace gguf_detail {

#ifdef TSR_GGUF_POSIX_IO
/* A buffer over a read-only mapping of a whole model file: CPU memory for the backends (its
 * type is the CPU buffer type), whose writes are refused instead of faulting, and which
 * unmaps the file when freed. */
struct file_mapping { void * addr; size_t size; };

static void mapped_free(tsr_backend_buffer_t b) {
    file_mapping * m = (file_mapping *) b->context;
    munmap(m->addr, m->size);
    delete m;
}
static void * mapped_base(tsr_backend_buffer_t b) { return ((file_mapping *) b->context)->addr; }
static bool refuse_write(const tsr_tensor * t) {
    return tsr_set_error("tensor '%s' is read-only: it lies in a read-only mapping of its model file (load without mmap to modify weights)",
                         t->name);
}
static bool mapped_set(tsr_backend_buffer_t, struct tsr_tensor * t, const void *, size_t, size_t) { return refuse_write(t); }
static bool mapped_memset(tsr_backend_buffer_t, struct tsr_tensor * t, uint8_t, size_t, size_t) { return refuse_write(t); }
static void mapped_clear(tsr_backend_buffer_t b, uint8_t) {
    tsr_set_error("buffer '%s' maps a model file read-only: not cleared", tsr_backend_buffer_name(b));
}
/* the CPU buffer's reads; its own free, base and refusals (gguf.h includes backend.h, so
 * backend.inl is compiled before this file in every include order) */
static constexpr struct tsr_backend_buffer_i k_mapped_buffer_i = [] {
    struct tsr_backend_buffer_i b = k_cpu_buffer_i;
    b.free_buffer = mapped_free;
    b.get_base = mapped_base;
    b.memset_tensor = mapped_memset;
    b.set_tensor = mapped_set;
    b.cpy_tensor = nullptr;  /* a copy into a mapped tensor goes to set_tensor: refused */
    b.clear = mapped_clear;
    return b;
}();

/* Map the whole file read-only; the kernel starts reading it ahead (without waiting). */
static tsr_backend_buffer_t map_file(const char * path, uint64_t & fsize) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { tsr_set_error("gguf '%s': cannot open: %s", path, strerror(errno)); return nullptr; }
    struct stat st;
    void * addr = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0) addr = mmap(nullptr, (size_t) st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    const int map_errno = errno;
    ::close(fd);  /* the mapping keeps the file */
    if (addr == MAP_FAILED) { tsr_set_error("gguf '%s': cannot map the file: %s", path, strerror(map_errno)); return nullptr; }
    fsize = (uint64_t) st.st_size;
#ifdef POSIX_MADV_WILLNEED
    (void) posix_madvise(addr, (size_t) fsize, POSIX_MADV_WILLNEED);
#endif
    file_mapping * m = new (std::nothrow) file_mapping{addr, (size_t) fsize};
    tsr_backend_buffer_t b = m ? tsr_backend_buffer_init(tsr_backend_cpu_buffer_type(), k_mapped_buffer_i, m, (size_t) fsize) : nullptr;
    if (!b) {
        munmap(addr, (size_t) fsize);
        delete m;
        tsr_set_error("gguf '%s': out of memory", path);
        return nullptr;
    }
    tsr_backend_buffer_set_usage(b, TSR_BUFFER_USAGE_WEIGHTS);
    return b;
}
#endif

} // namespace gguf_detail
TSR_IMPL_NS_END

TSR_API_IMPL tsr_backend_buffer_t tsr_gguf_map_tensors(const struct tsr_gguf_context * gguf_h, struct tsr_context * ctx, const char * path) {
    using namespace tsr_impl::gguf_detail;
    auto * gguf = tsr_impl::internal(gguf_h);
    if (!gguf || !ctx || !path) { tsr_set_error("tsr_gguf_map_tensors: NULL argument"); return nullptr; }
#ifdef TSR_GGUF_POSIX_IO
    for (const tinfo & ti : gguf->infos) {  /* checked before mapping: a refusal costs nothing */
        const uint64_t off = (uint64_t) gguf->data_offset + ti.offset;
        if (off % TSR_GGUF_MMAP_ALIGN != 0) {
            tsr_set_error("gguf '%s': tensor '%s' starts at byte %llu, not a multiple of %d: cannot be used in place (read the file instead)",
                          path, ti.name.c_str(), (unsigned long long) off, TSR_GGUF_MMAP_ALIGN);
            return nullptr;
        }
    }
    uint64_t fsize = 0;
    tsr_backend_buffer_t b = map_file(path, fsize);
    if (!b) return nullptr;
    std::vector<load_job> jobs;
    size_t total = 0;
    bool ok = false;
    try { ok = match_tensors(gguf, gguf_h, ctx, path, fsize, jobs, total); } catch (...) { ok = tsr_set_error("tsr_gguf_map_tensors: out of memory"); }
    char * base = (char *) mapped_base(b);
    for (size_t i = 0; ok && i < jobs.size(); ++i) {
        ok = tsr_backend_tensor_alloc(b, jobs[i].t, base + gguf->data_offset + jobs[i].ti->offset);
    }
    if (ok) return b;
    for (const load_job & j : jobs) {  /* leave the context as it was: no tensor points into the freed mapping */
        if (j.t->buffer == b) { j.t->buffer = nullptr; j.t->data = nullptr; }
    }
    tsr_backend_buffer_free(b);
    return nullptr;
#else
    (void) gguf;
    tsr_set_error("gguf '%s': mapping files is not supported on this platform (read the file instead)", path);
    return nullptr;
#endif
}
