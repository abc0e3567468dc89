// libFuzzer target: GGUF parsing from memory (both no_alloc modes), every getter on what
// parsed, and the runner's metadata readers (tokenizer, hyper-parameters) on top.
// Build and run: scripts/fuzz.sh [seconds] gguf  (clang -fsanitize=fuzzer,address,undefined)
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"

#include "model.h"
#include "tokenizer.h"

#include <cstdint>
#include <cstring>
#include <string>

static void exercise(const tsr_gguf_context * g) {
    volatile size_t sink = 0;
    sink += tsr_gguf_get_alignment(g) + tsr_gguf_get_data_offset(g) + tsr_gguf_get_data_size(g) + tsr_gguf_get_version(g);
    for (int64_t i = 0; i < tsr_gguf_get_n_kv(g); ++i) {
        sink += strlen(tsr_gguf_get_key(g, i));
        switch (tsr_gguf_get_kv_type(g, i)) {
            case TSR_GGUF_TYPE_UINT8: sink += tsr_gguf_get_val_u8(g, i); break;
            case TSR_GGUF_TYPE_INT8: sink += (size_t) tsr_gguf_get_val_i8(g, i); break;
            case TSR_GGUF_TYPE_UINT16: sink += tsr_gguf_get_val_u16(g, i); break;
            case TSR_GGUF_TYPE_INT16: sink += (size_t) tsr_gguf_get_val_i16(g, i); break;
            case TSR_GGUF_TYPE_UINT32: sink += tsr_gguf_get_val_u32(g, i); break;
            case TSR_GGUF_TYPE_INT32: sink += (size_t) tsr_gguf_get_val_i32(g, i); break;
            case TSR_GGUF_TYPE_FLOAT32: sink += tsr_gguf_get_val_f32(g, i) > 0; break;
            case TSR_GGUF_TYPE_BOOL: sink += tsr_gguf_get_val_bool(g, i); break;
            case TSR_GGUF_TYPE_UINT64: sink += tsr_gguf_get_val_u64(g, i); break;
            case TSR_GGUF_TYPE_INT64: sink += (size_t) tsr_gguf_get_val_i64(g, i); break;
            case TSR_GGUF_TYPE_FLOAT64: sink += tsr_gguf_get_val_f64(g, i) > 0; break;
            case TSR_GGUF_TYPE_STRING: sink += strlen(tsr_gguf_get_val_str(g, i)); break;
            case TSR_GGUF_TYPE_ARRAY: {
                const size_t n = tsr_gguf_get_arr_n(g, i);
                if (tsr_gguf_get_arr_type(g, i) == TSR_GGUF_TYPE_STRING) {
                    for (size_t j = 0; j < n; ++j) sink += strlen(tsr_gguf_get_arr_str(g, i, j));
                } else if (n) {
                    sink += ((const uint8_t *) tsr_gguf_get_arr_data(g, i))[0];
                }
                break;
            }
            default: break;
        }
    }
    for (int64_t i = 0; i < tsr_gguf_get_n_tensors(g); ++i) {
        sink += strlen(tsr_gguf_get_tensor_name(g, i)) + tsr_gguf_get_tensor_offset(g, i) + tsr_gguf_get_tensor_size(g, i) +
                (size_t) tsr_gguf_get_tensor_type(g, i) + (size_t) tsr_gguf_get_tensor_ne(g, i, 3);
    }
    // the runner's readers must cope with whatever metadata parsed
    trun::tokenizer tok;
    std::string err;
    if (tok.load(g, err)) {
        const std::vector<int32_t> ids = tok.encode("Hello world, caf\xC3\xA9 123", true);
        sink += tok.decode(ids).size();
    }
    trun::hparams hp;
    sink += trun::hparams_from_gguf(g, hp, err);
    (void) sink;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    for (int no_alloc = 0; no_alloc < 2; ++no_alloc) {
        tsr_context * ctx = nullptr;
        tsr_gguf_init_params p = {no_alloc != 0, &ctx};
        tsr_gguf_context * g = tsr_gguf_init_from_buffer(data, size, p);
        if (g) {
            exercise(g);
            // every tensor of the context is readable where it should be
            for (tsr_tensor * t = tsr_get_first_tensor(ctx); t && !no_alloc; t = tsr_get_next_tensor(ctx, t)) {
                volatile uint8_t s = 0;
                if (tsr_nbytes(t)) s = s + ((const uint8_t *) t->data)[tsr_nbytes(t) - 1];
                (void) s;
            }
        } else if (ctx) {
            __builtin_trap();  // a failed parse must not hand out a context
        }
        tsr_gguf_free(g);
        tsr_free(ctx);
    }
    return 0;
}
