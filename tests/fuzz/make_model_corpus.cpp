// Writes model_fuzz's seed corpus: small valid GPT-2 and LLaMA models (F32, F16) and a
// Qwen3-MoE (F16) with seeded random weights, every hostile variant (tests/run/hostile_models.h)
// of the F16 LLaMA and the expert-count variants of the Qwen3-MoE.
//   make_model_corpus OUT_DIR      (then copy OUT_DIR/* to tests/fuzz/corpus/model/)
#define TSR_IMPLEMENTATION
#include "tessera/tessera.h"
#include "tessera/backend.h"
#include "tessera/gguf.h"

#include "hostile_models.h"
#include "random_model.h"

#include <cstdio>
#include <string>

using namespace trun;

namespace {

bool write_valid(arch a, tsr_type wtype, const std::string & path, hparams & hp, std::string & err) {
    tokenizer tok;
    std::vector<std::string> merges;
    if (a == arch::gpt2) build_builtin_gpt2_vocab(8, tok, merges);
    else build_builtin_spm_vocab(8, tok);
    hp = trun_test::small_hparams(a, 8);  // as small as the shapes allow: the vocabularies' 256 byte tokens dominate
    hp.n_vocab = tok.n_vocab();
    return write_random_model(path.c_str(), hp, tok, merges, wtype, a == arch::gpt2, 42, err);
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]); return 2; }
    const std::string dir = argv[1];
    std::string err;
    int n = 0;
    for (arch a : {arch::gpt2, arch::llama, arch::qwen3moe}) {
        for (tsr_type wt : {TSR_TYPE_F32, TSR_TYPE_F16}) {
            if (a == arch::qwen3moe && wt == TSR_TYPE_F32) continue;  // its experts are what it adds
            const std::string base = dir + "/" + arch_name(a) + "_" + tsr_type_name(wt);
            hparams hp;
            if (!write_valid(a, wt, base + ".gguf", hp, err)) { fprintf(stderr, "%s: %s\n", base.c_str(), err.c_str()); return 1; }
            ++n;
            if (wt != TSR_TYPE_F16 || a == arch::gpt2) continue;  // llama's hostile variants cover gpt2's keys too
            for (const trun_test::hostile_case & hc : trun_test::hostile_cases(hp)) {
                if (a == arch::qwen3moe && hc.name.compare(0, 7, "experts") != 0) continue;  // the rest: llama's
                const std::string path = base + "_" + hc.name + ".gguf";
                if (!trun_test::write_edited_model(base + ".gguf", path, hc.edit, err)) {
                    fprintf(stderr, "%s: %s\n", path.c_str(), err.c_str());
                    return 1;
                }
                ++n;
            }
        }
    }
    printf("wrote %d files to %s\n", n, dir.c_str());
    return 0;
}
