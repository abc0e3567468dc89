// encoder_args.h - tessera-whisper-encoder's command line.
#pragma once

#include "encoder.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace wenc {

struct encoder_args {
    hparams hp;
    std::string wtype = "f32";          // the projection and MLP matrices
    uint64_t seed = 1234;               // weights; the synthetic input uses seed + 1
    std::string mel_path;               // empty: a synthetic log-mel spectrogram
    std::string out_path;               // empty: no output file
    std::string backend = "cpu";
    int device = 0;
    bool device_given = false;
    bool list_devices = false;
    int threads = 0;                    // 0: the backend's default
    bool flash_attn = true;
    int repeat = 1;                     // timed encodes after a warm-up one
    bool show_help = false;
};

inline void print_usage(const char * argv0) {
    printf("usage: %s [options]\n"
           "A Whisper-style audio encoder (Whisper tiny's shapes by default) with weights generated from a seed.\n"
           "  --n-mel N              mel bins (default 80)\n"
           "  --n-frames N           input frames, 10 ms each (default 3000 = 30 s)\n"
           "  --d-model N            width (default 384)\n"
           "  --n-head N             attention heads, dividing d-model (default 6)\n"
           "  --n-layer N            transformer blocks (default 4)\n"
           "  --n-ff N               MLP width (default 4 x d-model)\n"
           "  --wtype f32|f16        type of the projection and MLP matrices (default f32)\n"
           "  --seed S               weight seed (default 1234)\n"
           "  --mel PATH             log-mel input: raw little-endian float32, n-mel rows of n-frames\n"
           "                         values (default: a synthetic spectrogram)\n"
           "  --out PATH             write the encoder output: raw float32, n_ctx rows of d-model values\n"
           "  --backend NAME         cpu | vulkan | cuda, or a device name from --list-devices (default cpu)\n"
           "  --device N             GPU index for vulkan/cuda, -1 = the default\n"
           "  --list-devices         list the devices of every backend built in, and exit\n"
           "  -t, --threads N        CPU threads, 1..1024 (default: the backend's)\n"
           "  --no-flash-attn        attention with mul_mat + soft_max_ext instead of flash_attn_ext\n"
           "  --repeat N             timed encodes after the first (default 1)\n",
           argv0);
}

// false + message on a bad command line
inline bool parse_args(int argc, char ** argv, encoder_args & a, std::string & err) {
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        long long n = 0;
        auto int_flag = [&](int & dst, long long lo, long long hi) {
            if (!exw::parse_int(argc, argv, i, lo, hi, n, err)) return false;
            dst = (int) n;
            return true;
        };
        auto str_flag = [&](std::string & dst) {
            if (i + 1 >= argc) { err = "missing value after " + k; return false; }
            dst = argv[++i];
            return true;
        };
        bool ok = true;
        if (k == "-h" || k == "--help") a.show_help = true;
        else if (k == "--n-mel") ok = int_flag(a.hp.n_mel, 1, k_max_width);
        else if (k == "--n-frames") ok = int_flag(a.hp.n_frames, 1, k_max_frames);
        else if (k == "--d-model") ok = int_flag(a.hp.d_model, 4, k_max_width);
        else if (k == "--n-head") ok = int_flag(a.hp.n_head, 1, k_max_width);
        else if (k == "--n-layer") ok = int_flag(a.hp.n_layer, 0, k_max_layers);
        else if (k == "--n-ff") ok = int_flag(a.hp.n_ff, 1, 4 * k_max_width);
        else if (k == "--wtype") ok = str_flag(a.wtype);
        else if (k == "--seed") { ok = exw::parse_int(argc, argv, i, 0, INT64_MAX, n, err); a.seed = (uint64_t) n; }
        else if (k == "--mel") ok = str_flag(a.mel_path);
        else if (k == "--out") ok = str_flag(a.out_path);
        else if (k == "--backend") ok = str_flag(a.backend);
        else if (k == "--device") { ok = int_flag(a.device, -1, 1023); a.device_given = true; }
        else if (k == "--list-devices") a.list_devices = true;
        else if (k == "-t" || k == "--threads") ok = int_flag(a.threads, 1, 1024);
        else if (k == "--no-flash-attn") a.flash_attn = false;
        else if (k == "--repeat") ok = int_flag(a.repeat, 0, 1000000);
        else { err = "unknown argument '" + k + "'"; return false; }
        if (!ok) return false;
    }
    if (a.wtype != "f32" && a.wtype != "f16") { err = "--wtype " + a.wtype + ": expected f32 or f16"; return false; }
    if (a.backend.empty()) { err = "--backend needs a name (see --list-devices)"; return false; }
    return check_hparams(a.hp, err);
}

} // namespace wenc
