// args.h - tessera-run's command line.
#pragma once

#include "sampling.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace trun {

inline std::string fmt_num(double v) {
    char b[32];
    snprintf(b, sizeof b, "%.15g", v);
    return b;
}

struct run_args {
    std::string model;                  // empty: the embedded random GPT-2
    std::string prompt = "Once upon a time";
    int n_predict = 64;
    std::string backend = "cpu";        // a backend kind (cpu | vulkan | cuda) or a device name (Vulkan1)
    int device = 0;                     // -1: the backend's default (TSR_VULKAN_DEVICE for vulkan)
    bool list_devices = false;
    bool device_given = false;
    int threads = 0;                    // 0: the backend's default
    int n_gpu_layers = -1;              // -1: every layer when a GPU backend is chosen
    int n_ctx = 0;                      // 0: model's (capped at 4096)
    int n_batch = 64;
    bool flash_attn = true;
    bool repack = true;                 // CPU backend: 4- and 5-bit / Q3_K / Q2_K matrices interleaved in a CPU_REPACK buffer (README)
    bool use_mmap = true;               // CPU backend: weights in place from a read-only mapping of the file
    std::string kv_type = "f16";
    sampler_params samp;
    bool parse_special = false;         // --special: control tokens written in the prompt are tokens
    bool verbose_prompt = false;        // --verbose-prompt: print the prompt's ids and pieces
    bool show_help = false;
};

inline void print_usage(const char * argv0) {
    printf("usage: %s [-m model.gguf] [-p prompt] [-n n_predict] [options]\n"
           "  -m, --model PATH       GGUF model (gpt2, llama, qwen2 or qwen3 architecture); without it a small\n"
           "                         random GPT-2 is built, written to a temporary GGUF and run\n"
           "  -p, --prompt TEXT      prompt (default \"Once upon a time\")\n"
           "  -n, --n-predict N      tokens to generate (default 64)\n"
           "  --backend NAME         cpu | vulkan | cuda, or a device name from --list-devices\n"
           "                         (default cpu)\n"
           "  --device N             GPU index for vulkan/cuda, -1 = the default (vulkan: the\n"
           "                         TSR_VULKAN_DEVICE environment variable, else the best GPU;\n"
           "                         default: -1 for vulkan, 0 for cuda)\n"
           "  --list-devices         list the devices of every backend built in, and exit\n"
           "  -t, --threads N        CPU threads, 1..1024 (default: the backend's)\n"
           "  -ngl, --n-gpu-layers N with a GPU backend: the last N layers' weights (and the\n"
           "                         output matrix when N covers every layer) on the GPU, the\n"
           "                         rest on the CPU; larger N means all (default: all)\n"
           "  -c, --ctx-size N       context length, at most the model's (default: the model's,\n"
           "                         at most 4096)\n"
           "  -b, --batch-size N     prompt tokens per evaluation, >= 1 (default 64)\n"
           "  --temp T               temperature >= 0; 0 = greedy (default 0.8)\n"
           "  --top-k K              >= 0 (default 40; 0 = off)\n"
           "  --top-p P              in [0, 1] (default 0.95; 1 = off)\n"
           "  --seed S               sampling seed (default 42)\n"
           "  --kv-type f16|f32      KV cache type (default f16)\n"
           "  --no-flash-attn        attention with mul_mat + soft_max_ext instead of flash_attn_ext\n"
           "  --special              control tokens written in the prompt (<|endoftext|>,\n"
           "                         <|begin_of_text|>, <|im_start|>, ...) are those tokens;\n"
           "                         without it they are tokenized as text\n"
           "  --verbose-prompt       print the prompt's token ids and pieces before generating\n"
           "  --no-mmap              read the weights into memory instead of using them in place from a\n"
           "                         read-only mapping of the file (the CPU backend maps by default)\n"
           "  --repack               CPU backend: read 4- and 5-bit, Q3_K and Q2_K weight matrices into a\n"
           "                         CPU_REPACK buffer that interleaves 8 rows for the kernels, at no memory\n"
           "                         cost (the other weights stay mapped); the default (docs: README)\n"
           "  --no-repack            keep every weight as in the file, all of it mapped\n",
           argv0);
}

// false + message on a bad command line
inline bool parse_args(int argc, char ** argv, run_args & a, std::string & err) {
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        auto val = [&](const char ** out) {
            if (i + 1 >= argc) { err = "missing value after " + k; return false; }
            *out = argv[++i];
            return true;
        };
        // a number in [lo, hi], or an error naming the flag, the value and the range
        auto num = [&](double & out, double lo, double hi) {
            const char * v = nullptr;
            if (!val(&v)) return false;
            char * end = nullptr;
            out = strtod(v, &end);
            if (!end || *end || end == v || out != out) { err = "bad number '" + std::string(v) + "' after " + k; return false; }
            if (out < lo || out > hi) {
                err = k + " " + v + " is out of range [" + fmt_num(lo) + ", " + fmt_num(hi) + "]";
                return false;
            }
            return true;
        };
        // an integer count in [lo, hi]
        auto count = [&](int & out, int lo, int hi) {
            double d = 0;
            if (!num(d, lo, hi)) return false;
            if (d != (double) (long long) d) { err = k + " needs a whole number, got " + fmt_num(d); return false; }
            out = (int) d;
            return true;
        };
        const char * s = nullptr;
        double d = 0;
        const int big = 1 << 24;  // no count tessera-run takes is anywhere near this
        if (k == "-h" || k == "--help") a.show_help = true;
        else if (k == "-m" || k == "--model") { if (!val(&s)) return false; a.model = s; }
        else if (k == "-p" || k == "--prompt") { if (!val(&s)) return false; a.prompt = s; }
        else if (k == "-n" || k == "--n-predict") { if (!count(a.n_predict, 0, big)) return false; }
        else if (k == "--backend") { if (!val(&s)) return false; a.backend = s; }
        else if (k == "--list-devices") a.list_devices = true;
        else if (k == "--device") { if (!count(a.device, -1, 1023)) return false; a.device_given = true; }
        else if (k == "-t" || k == "--threads") { if (!count(a.threads, 1, 1024)) return false; }
        else if (k == "-ngl" || k == "--n-gpu-layers") { if (!count(a.n_gpu_layers, 0, big)) return false; }
        else if (k == "-c" || k == "--ctx-size") { if (!count(a.n_ctx, 1, big)) return false; }
        else if (k == "-b" || k == "--batch-size") { if (!count(a.n_batch, 1, big)) return false; }
        else if (k == "--temp") { if (!num(d, 0, 1e6)) return false; a.samp.temp = (float) d; }
        else if (k == "--top-k") { int v = 0; if (!count(v, 0, big)) return false; a.samp.top_k = v; }
        else if (k == "--top-p") { if (!num(d, 0, 1)) return false; a.samp.top_p = (float) d; }
        else if (k == "--seed") { if (!num(d, 0, 9007199254740992.0)) return false; a.samp.seed = (uint64_t) d; }
        else if (k == "--kv-type") { if (!val(&s)) return false; a.kv_type = s; }
        else if (k == "--no-flash-attn") a.flash_attn = false;
        else if (k == "--special") a.parse_special = true;
        else if (k == "--verbose-prompt") a.verbose_prompt = true;
        else if (k == "--no-mmap") a.use_mmap = false;
        else if (k == "--repack") a.repack = true;
        else if (k == "--no-repack") a.repack = false;
        else { err = "unknown argument '" + k + "' (see --help)"; return false; }
    }
    if (a.backend.empty()) { err = "--backend needs a name (see --list-devices)"; return false; }
    if (a.kv_type != "f16" && a.kv_type != "f32") { err = "--kv-type must be f16 or f32"; return false; }
    return true;
}

} // namespace trun
