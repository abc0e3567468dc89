// cli.h - tessera-plan-viewer's input and output: arguments, the allocation trace, the
// JSON/SVG files. Each error names the bad value (a flag's value, a trace's line number,
// the OS error of a file) in one line. Kept apart from main.cpp so tests can check them.
#pragma once

#include "tessera/tessera.h"
#include "tessera/alloc.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace pv {

// Largest --tokens: the attention scores of a layer take tokens^2 * 4 heads * 4 bytes, and
// gallocr allocates the planned buffer (4096: 256 MiB for the scores).
constexpr long k_max_tokens = 4096;

struct args {
    std::string prefix = "plan";
    std::string trace;
    std::string graph = "transformer";  // or "unet"
    int tokens = 64;
    bool help = false;
};

inline const char * usage() {
    return "usage: tessera-plan-viewer [--out PREFIX] [--graph transformer|unet] [--tokens N (1-4096)] [--trace FILE.csv]";
}

// The whole of `text` as an integer in [lo, hi].
inline bool parse_int(const char * text, long long lo, long long hi, long long & out) {
    if (!text || !*text) return false;
    errno = 0;
    char * end = nullptr;
    const long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    out = v;
    return true;
}

inline bool parse_args(int argc, char ** argv, args & a, std::string & err) {
    for (int i = 1; i < argc; i++) {
        const std::string flag = argv[i];
        if (flag == "-h" || flag == "--help") { a.help = true; continue; }
        if (flag != "--out" && flag != "--tokens" && flag != "--trace" && flag != "--graph") {
            err = "unknown argument '" + flag + "'";
            return false;
        }
        if (i + 1 >= argc) { err = flag + " needs a value"; return false; }
        const char * value = argv[++i];
        if (flag == "--out") {
            if (!*value) { err = "--out: empty prefix"; return false; }
            a.prefix = value;
        } else if (flag == "--graph") {
            if (std::string(value) != "transformer" && std::string(value) != "unet") {
                err = "--graph '" + std::string(value) + "' is not one of transformer, unet";
                return false;
            }
            a.graph = value;
        } else if (flag == "--trace") {
            if (!*value) { err = "--trace: empty file name"; return false; }
            a.trace = value;
        } else {
            long long t = 0;
            if (!parse_int(value, 1, k_max_tokens, t)) {
                err = "--tokens '" + std::string(value) + "' is not a whole number in [1, " + std::to_string(k_max_tokens) + "]";
                return false;
            }
            a.tokens = (int) t;
        }
    }
    return true;
}

// One buffer of an allocation trace: live on steps [lower, upper), `size` bytes.
struct trace_entry {
    long long id = 0;
    tsr_pack_item item = {0, 0, 0, 0};
};

// Split a line at commas.
inline std::vector<std::string> split_fields(const std::string & line) {
    std::vector<std::string> f(1);
    for (char c : line) {
        if (c == ',') f.emplace_back();
        else if (c != '\r') f.back() += c;
    }
    return f;
}

// One data line "id,lower,upper,size": integers, 0 <= lower <= upper <= INT32_MAX (the
// plan's steps are ints), 0 <= size.
inline bool parse_trace_line(const std::string & line, trace_entry & e, std::string & why) {
    const std::vector<std::string> f = split_fields(line);
    if (f.size() != 4) { why = "expected 4 fields id,lower,upper,size, found " + std::to_string(f.size()); return false; }
    const char * names[4] = {"id", "lower", "upper", "size"};
    const long long lo[4] = {INT64_MIN, 0, 0, 0}, hi[4] = {INT64_MAX, INT32_MAX, INT32_MAX, INT64_MAX};
    long long v[4];
    for (int k = 0; k < 4; ++k) {
        if (!parse_int(f[k].c_str(), lo[k], hi[k], v[k])) {
            why = std::string(names[k]) + " '" + f[k] + "' is not a whole number in [" + std::to_string(lo[k]) + ", " + std::to_string(hi[k]) + "]";
            return false;
        }
    }
    if (v[2] < v[1]) { why = "upper " + std::to_string(v[2]) + " is below lower " + std::to_string(v[1]); return false; }
    e.id = v[0];
    e.item = tsr_pack_item{v[1], v[2], (size_t) v[3], 0};
    return true;
}

// A trace's text: an optional header line (not starting with a digit or '-'), then one
// entry per line; blank lines are skipped. Errors name the trace and the line number.
inline bool parse_trace(const std::string & text, const std::string & name, std::vector<trace_entry> & out, std::string & err) {
    out.clear();
    size_t pos = 0;
    for (int line_no = 1; pos < text.size(); ++line_no) {
        size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) eol = text.size();
        const std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const bool header = line_no == 1 && !(isdigit((unsigned char) line[0]) || line[0] == '-');
        if (header) continue;
        trace_entry e;
        std::string why;
        if (!parse_trace_line(line, e, why)) { err = name + ": line " + std::to_string(line_no) + ": " + why; return false; }
        out.push_back(e);
    }
    if (out.empty()) { err = name + ": no buffers in the trace"; return false; }
    return true;
}

// The whole file, or false with the OS error.
inline bool read_file(const std::string & path, std::string & text, std::string & err) {
    FILE * f = fopen(path.c_str(), "rb");
    if (!f) { err = "cannot read trace '" + path + "': " + strerror(errno); return false; }
    text.clear();
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    const bool failed = ferror(f) != 0;
    const int e = errno;
    fclose(f);
    if (failed) { err = "cannot read trace '" + path + "': " + strerror(e); return false; }
    return true;
}

// Write one output file with `write`; false with the file's name and the OS error.
template <typename Writer>
inline bool write_file(const std::string & path, Writer write, std::string & err) {
    FILE * f = fopen(path.c_str(), "w");
    if (!f) { err = "cannot write '" + path + "': " + strerror(errno); return false; }
    const bool wrote = write(f);
    const int e = errno;
    const bool closed = fclose(f) == 0;
    if (!wrote || !closed) {
        err = "cannot write '" + path + "': " + (wrote ? strerror(errno) : std::string(tsr_last_error()) + " (" + strerror(e) + ")");
        return false;
    }
    return true;
}

// PREFIX.svg with one panel per plan (buffer 0), PREFIX.json of the last plan (the one
// the program uses).
inline bool write_plan_files(const std::vector<tsr_plan_panel> & panels, const std::string & prefix, std::string & err) {
    if (panels.empty()) { err = "no plan to write"; return false; }
    return write_file(prefix + ".json", [&](FILE * f) { return tsr_plan_write_json(panels.back().plan, f); }, err) &&
           write_file(prefix + ".svg", [&](FILE * f) { return tsr_plan_write_svg_panels(panels.data(), (int) panels.size(), 0, f); }, err);
}

} // namespace pv
