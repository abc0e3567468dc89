// tessera-run's command line (examples/run/args.h): every count and value is range-checked
// and each error names its flag, the value and the accepted range (issue 15, item 7).
#include <catch2/catch.hpp>

#include "args.h"
#include "backends.h"

#include <string>
#include <vector>

namespace {

// parse argv (without the program name); returns the error, "" when it parsed
std::string parse(std::vector<std::string> args, trun::run_args * out = nullptr) {
    std::vector<char *> argv;
    std::string prog = "tessera-run";
    argv.push_back(&prog[0]);
    for (std::string & a : args) argv.push_back(&a[0]);
    trun::run_args a;
    std::string err;
    const bool ok = trun::parse_args((int) argv.size(), argv.data(), a, err);
    if (out) *out = a;
    return ok ? std::string() : err;
}

} // namespace

TEST_CASE("tessera-run arguments: values in range parse", "[run][args]") {
    trun::run_args a;
    CHECK(parse({"-n", "0", "-t", "2", "-b", "1", "-c", "128", "--temp", "0", "--top-k", "0", "--top-p", "1", "--seed", "7"}, &a).empty());
    CHECK(a.n_predict == 0);
    CHECK(a.threads == 2);
    CHECK(a.n_batch == 1);
    CHECK(a.n_ctx == 128);
    CHECK(a.samp.top_p == 1.0f);
    CHECK_FALSE(a.device_given);
    CHECK(parse({"--backend", "vulkan", "--device", "-1"}, &a).empty());
    CHECK(a.device == -1);
    CHECK(a.device_given);
    CHECK_FALSE(a.parse_special);
    CHECK_FALSE(a.verbose_prompt);
    CHECK(parse({"--special", "--verbose-prompt"}, &a).empty());
    CHECK(a.parse_special);
    CHECK(a.verbose_prompt);
    CHECK(a.use_mmap);  // mapped unless asked not to
    CHECK(parse({"--no-mmap"}, &a).empty());
    CHECK_FALSE(a.use_mmap);
    CHECK(a.repack);  // CPU_REPACK's mat-vec and GEMM panels are at least the file layout's: on by default
    CHECK(parse({"--no-repack"}, &a).empty());
    CHECK_FALSE(a.repack);
    CHECK(parse({"--no-repack", "--repack"}, &a).empty());
    CHECK(a.repack);
    CHECK_FALSE(a.list_devices);
    CHECK(parse({"--list-devices"}, &a).empty());
    CHECK(a.list_devices);
}

TEST_CASE("tessera-run backends: picked through the registry by kind or device name", "[run][args][device]") {
    std::string err;
    tsr_backend_t cpu = trun::make_backend("cpu", 0, 3, err);
    REQUIRE(cpu != nullptr);
    CHECK(tsr_backend_get_device(cpu) == tsr_backend_dev_by_name("CPU"));
    CHECK(tsr_backend_cpu_get_n_threads(cpu) == 3);
    tsr_backend_free(cpu);
    CHECK(trun::device_name("vulkan", -1) == "vulkan");   // the kind's first (default) device
    CHECK(trun::device_name("cpu", 0) == "cpu");          // one device: its own name
    CHECK(trun::device_name("cpu", 2) == "cpu");          // --device does not apply to the CPU
    if (tsr_backend_reg_by_name("vulkan")) {
        // an index past the devices there are is an error naming the device, never another device
        CHECK(trun::device_name("vulkan", 1) == "Vulkan1");
        const std::string past = "Vulkan" + std::to_string(tsr_backend_reg_dev_count(tsr_backend_reg_by_name("vulkan")));
        CHECK(trun::make_backend("vulkan", (int) tsr_backend_reg_dev_count(tsr_backend_reg_by_name("vulkan")), 0, err) == nullptr);
        CHECK_THAT(err, Catch::Matchers::Contains("'" + past + "'"));
    }
    CHECK(trun::make_backend("nosuch", 0, 0, err) == nullptr);
    CHECK_THAT(err, Catch::Matchers::Contains("'nosuch'"));
    CHECK_THAT(err, Catch::Matchers::Contains("CPU"));   // the devices there are
}

TEST_CASE("tessera-run arguments: each bad value names its flag", "[run][args]") {
    struct bad { std::vector<std::string> args; std::string expect; };
    const std::vector<bad> cases = {
        {{"-n", "-5"}, "-n -5 is out of range"},
        {{"-n", "2147483647"}, "-n 2147483647 is out of range"},  // prompt + n used to overflow int
        {{"-b", "0"}, "-b 0 is out of range"},
        {{"-t", "0"}, "-t 0 is out of range"},
        {{"-c", "0"}, "-c 0 is out of range"},
        {{"--temp", "-0.5"}, "--temp -0.5 is out of range"},
        {{"--top-p", "1.5"}, "--top-p 1.5 is out of range [0, 1]"},
        {{"--top-k", "-1"}, "--top-k -1 is out of range"},
        {{"--device", "-2"}, "--device -2 is out of range"},
        {{"-n", "2.5"}, "-n needs a whole number"},
        {{"-n", "abc"}, "bad number 'abc' after -n"},
        {{"--temp", "nan"}, "bad number 'nan' after --temp"},
        {{"-n"}, "missing value after -n"},
        {{"--kv-type", "q4"}, "--kv-type must be f16 or f32"},
        {{"--frobnicate"}, "unknown argument '--frobnicate'"},
    };
    for (const bad & b : cases) {
        INFO(b.expect);
        const std::string err = parse(b.args);
        CHECK(err.find(b.expect) != std::string::npos);
    }
}
