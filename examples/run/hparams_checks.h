// hparams_checks.h - reading a model's counts from GGUF metadata without trusting them.
//
// A model file is input: its counts (block_count, head counts, sizes, the vocabulary) size
// vectors, contexts and buffers. So each count is read at its full width (a u64 of 2^32 + 1
// is 2^32 + 1, never 1), checked against a range, then cross-checked against the tensors the
// file holds (block_count against the blk.N layers present, embedding and vocabulary sizes
// against token_embd.weight, ...) before anything is sized from it. Each error names the
// key, its value and the allowed range or the tensor it contradicts.
#pragma once

#include "tessera/gguf.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace trun {

// The value of an integer metadata key, whatever its integer type, without truncation.
struct meta_int {
    int64_t value = 0;          // valid when !above_int64
    bool above_int64 = false;   // a u64 beyond INT64_MAX
    uint64_t raw_u64 = 0;       // that u64
    std::string text() const { return above_int64 ? std::to_string(raw_u64) : std::to_string(value); }
};

// false when the key's value is not an integer.
inline bool read_meta_int(const tsr_gguf_context * g, int64_t k, meta_int & out) {
    out = meta_int();
    switch (tsr_gguf_get_kv_type(g, k)) {
        case TSR_GGUF_TYPE_UINT8: out.value = tsr_gguf_get_val_u8(g, k); return true;
        case TSR_GGUF_TYPE_INT8: out.value = tsr_gguf_get_val_i8(g, k); return true;
        case TSR_GGUF_TYPE_UINT16: out.value = tsr_gguf_get_val_u16(g, k); return true;
        case TSR_GGUF_TYPE_INT16: out.value = tsr_gguf_get_val_i16(g, k); return true;
        case TSR_GGUF_TYPE_UINT32: out.value = tsr_gguf_get_val_u32(g, k); return true;
        case TSR_GGUF_TYPE_INT32: out.value = tsr_gguf_get_val_i32(g, k); return true;
        case TSR_GGUF_TYPE_INT64: out.value = tsr_gguf_get_val_i64(g, k); return true;
        case TSR_GGUF_TYPE_UINT64:
            out.raw_u64 = tsr_gguf_get_val_u64(g, k);
            out.above_int64 = out.raw_u64 > (uint64_t) INT64_MAX;
            out.value = out.above_int64 ? 0 : (int64_t) out.raw_u64;
            return true;
        default: return false;
    }
}

// Read integer key `key` into out if present, refusing values outside [lo, hi] (hi <= INT32_MAX).
// A missing key is an error only when required (out keeps its value otherwise).
inline bool read_count(const tsr_gguf_context * g, const std::string & key, int64_t lo, int64_t hi, bool required, int & out,
                       std::string & err) {
    const int64_t k = tsr_gguf_find_key(g, key.c_str());
    if (k < 0) {
        if (required) err = "missing " + key;
        return !required;
    }
    meta_int v;
    if (!read_meta_int(g, k, v)) {
        err = key + " has type " + tsr_gguf_type_name(tsr_gguf_get_kv_type(g, k)) + ", expected an integer";
        return false;
    }
    if (v.above_int64 || v.value < lo || v.value > hi) {
        err = key + " = " + v.text() + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return false;
    }
    out = (int) v.value;
    return true;
}

// The layer index N of a tensor named "blk.N....", or -1.
inline int64_t layer_index(const char * name) {
    if (strncmp(name, "blk.", 4) != 0 || name[4] < '0' || name[4] > '9') return -1;
    char * end = nullptr;
    const unsigned long long n = strtoull(name + 4, &end, 10);
    return *end == '.' && n < (unsigned long long) INT32_MAX ? (int64_t) n : -1;
}

// How many layers the file's tensors hold: the largest N of a "blk.N." tensor + 1.
inline int64_t layers_in_file(const tsr_gguf_context * g) {
    int64_t n = 0;
    for (int64_t i = 0; i < tsr_gguf_get_n_tensors(g); ++i) {
        const int64_t il = layer_index(tsr_gguf_get_tensor_name(g, i));
        if (il + 1 > n) n = il + 1;
    }
    return n;
}

// A count from metadata must equal dimension `dim` of a tensor the file holds (absent
// tensors are left to the weight binding, which names them).
inline bool count_matches_tensor(const tsr_gguf_context * g, const std::string & what, int64_t value, const char * tensor, int dim,
                                 std::string & err) {
    const int64_t id = tsr_gguf_find_tensor(g, tensor);
    if (id < 0) return true;
    const int64_t ne = tsr_gguf_get_tensor_ne(g, id, dim);
    if (ne == value) return true;
    err = what + " = " + std::to_string(value) + " contradicts tensor '" + tensor + "': its ne[" + std::to_string(dim) + "] is " +
          std::to_string(ne);
    return false;
}

} // namespace trun
