// encoder_args.h - tessera-whisper-encoder's command line and its input file.
#pragma once

#include "encoder.h"

#include <cmath>
#include <cstdio>
#include <vector>
#include <string>

namespace wenc {

struct encoder_args {
    hparams hp;
    std::string wtype = "f32";          // the projection and MLP matrices
    std::string mel_path;               // empty: a synthetic log-mel spectrogram
    bool flash_attn = true;
    exw::common_args c;
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
           "  --mel PATH             log-mel input: raw little-endian float32, n-mel rows of n-frames\n"
           "                         values (default: a synthetic spectrogram)\n"
           "  --out PATH             write the encoder output: raw float32, n_ctx rows of d-model values\n"
           "  --no-flash-attn        attention with mul_mat + soft_max_ext instead of flash_attn_ext\n"
           "%s",
           argv0, exw::common_usage());
}

// false + message on a bad command line
inline bool parse_args(int argc, char ** argv, encoder_args & a, std::string & err) {
    exw::arg_reader r(argc, argv, err);
    while (r.next()) {
        bool ok = true;
        if (exw::read_common_flag(r, a.c, ok)) {}
        else if (r.is("--n-mel")) ok = r.int_value(a.hp.n_mel, 1, k_max_width);
        else if (r.is("--n-frames")) ok = r.int_value(a.hp.n_frames, 1, k_max_frames);
        else if (r.is("--d-model")) ok = r.int_value(a.hp.d_model, 4, k_max_width);
        else if (r.is("--n-head")) ok = r.int_value(a.hp.n_head, 1, k_max_width);
        else if (r.is("--n-layer")) ok = r.int_value(a.hp.n_layer, 0, k_max_layers);
        else if (r.is("--n-ff")) ok = r.int_value(a.hp.n_ff, 1, 4 * k_max_width);
        else if (r.is("--wtype")) ok = r.str_value(a.wtype);
        else if (r.is("--mel")) ok = r.str_value(a.mel_path);
        else if (r.is("--no-flash-attn")) a.flash_attn = false;
        else ok = r.unknown();
        if (!ok) return false;
    }
    if (a.wtype != "f32" && a.wtype != "f16") { err = "--wtype " + a.wtype + ": expected f32 or f16"; return false; }
    return exw::finish_common(a.c, err) && check_hparams(a.hp, err);
}

// The whole file as n_mel x n_frames floats, or false + a message naming the sizes.
inline bool read_mel(const std::string & path, const hparams & hp, std::vector<float> & mel, std::string & err) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) { err = "cannot open " + path; return false; }
    const size_t want = (size_t) hp.n_mel * (size_t) hp.n_frames;
    const long bytes = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1L;
    bool ok = bytes >= 0 && (size_t) bytes == want * sizeof(float);
    if (ok) {
        mel.resize(want);
        rewind(f);
        ok = fread(mel.data(), sizeof(float), want, f) == want;
        if (!ok) err = "cannot read " + path;
    } else {
        err = path + " has " + std::to_string(bytes) + " bytes; n_mel x n_frames = " + std::to_string(hp.n_mel) + " x " +
              std::to_string(hp.n_frames) + " float32 values need " + std::to_string(want * sizeof(float)) +
              " (raw float32, each mel bin's frames in a row)";
    }
    fclose(f);
    for (size_t i = 0; ok && i < want; ++i) {
        if (!std::isfinite(mel[i])) { err = path + ": value " + std::to_string(i) + " is not finite"; ok = false; }
    }
    return ok;
}

} // namespace wenc
