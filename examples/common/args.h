// args.h - the command-line flags the example programs share (backend, threads, seed,
// repeats, output file), a reader for the rest, and a range check. Shared by examples/whisper-encoder and
// examples/unet-block.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace exw {

// true when lo <= v <= hi, else false + "<name> = <v> is out of range [lo, hi]"
inline bool check_range(const char * name, int v, int lo, int hi, std::string & err) {
    if (v >= lo && v <= hi) return true;
    err = std::string(name) + " = " + std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return false;
}

// Walks argv flag by flag; each value read is checked, and the first problem is err.
class arg_reader {
public:
    arg_reader(int argc, char ** argv, std::string & err) : argc_(argc), argv_(argv), err_(err) {}

    bool next() {
        if (++i_ >= argc_) return false;
        flag_ = argv_[i_];
        return true;
    }
    const std::string & flag() const { return flag_; }
    bool is(const char * name, const char * alias = nullptr) const { return flag_ == name || (alias && flag_ == alias); }

    bool str_value(std::string & dst) {
        if (i_ + 1 >= argc_) { err_ = "missing value after " + flag_; return false; }
        dst = argv_[++i_];
        return true;
    }
    // a whole number in [lo, hi], or a message naming the flag, the value and the range
    bool int_value(long long & dst, long long lo, long long hi) {
        std::string v;
        if (!str_value(v)) return false;
        char * end = nullptr;
        dst = strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end) { err_ = "bad whole number '" + v + "' after " + flag_; return false; }
        if (dst < lo || dst > hi) {
            err_ = flag_ + " " + v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
            return false;
        }
        return true;
    }
    bool int_value(int & dst, int lo, int hi) {
        long long v = 0;
        if (!int_value(v, lo, hi)) return false;
        dst = (int) v;
        return true;
    }
    bool unknown() {
        err_ = "unknown argument '" + flag_ + "'";
        return false;
    }

private:
    int argc_;
    char ** argv_;
    std::string & err_;
    int i_ = 0;
    std::string flag_;
};

struct common_args {
    uint64_t seed = 1234;          // the weights; generated inputs use seed + 1
    std::string out_path;          // empty: no output file
    std::string backend = "cpu";   // a backend kind or a device name
    int device = 0;                // -1: the backend's default (vulkan's without --device)
    bool device_given = false;
    bool list_devices = false;
    int threads = 0;               // 0: the backend's default
    int repeat = 1;                // timed runs after a first one
    bool show_help = false;
};

// The usage lines of the common flags.
inline const char * common_usage() {
    return "  --seed S               weight seed (default 1234)\n"
           "  --backend NAME         cpu | vulkan | cuda, or a device name from --list-devices (default cpu)\n"
           "  --device N             GPU index for vulkan/cuda, -1 = the default\n"
           "  --list-devices         list the devices of every backend built in, and exit\n"
           "  -t, --threads N        CPU threads, 1..1024 (default: the backend's)\n"
           "  --repeat N             timed runs after the first (default 1)\n";
}

// Reads the reader's current flag when it is a common one: false when it is not, else
// ok says whether its value was good.
inline bool read_common_flag(arg_reader & r, common_args & c, bool & ok) {
    long long n = 0;
    if (r.is("-h", "--help")) c.show_help = true;
    else if (r.is("--seed")) { ok = r.int_value(n, 0, INT64_MAX); c.seed = (uint64_t) n; }
    else if (r.is("--out")) ok = r.str_value(c.out_path);
    else if (r.is("--backend")) ok = r.str_value(c.backend);
    else if (r.is("--device")) { ok = r.int_value(c.device, -1, 1023); c.device_given = true; }
    else if (r.is("--list-devices")) c.list_devices = true;
    else if (r.is("-t", "--threads")) ok = r.int_value(c.threads, 1, 1024);
    else if (r.is("--repeat")) ok = r.int_value(c.repeat, 0, 1000000);
    else return false;
    return true;
}

// After parsing: false + message for a bad combination; the Vulkan default device when none given.
inline bool finish_common(common_args & c, std::string & err) {
    if (c.backend.empty()) { err = "--backend needs a name (see --list-devices)"; return false; }
    if (c.backend == "vulkan" && !c.device_given) c.device = -1;
    return true;
}

} // namespace exw
