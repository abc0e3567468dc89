// tessera-plan-viewer's inputs and outputs (examples/plan-viewer/cli.h): every bad
// argument, trace line and file names what is wrong (issue 15, item 8).
#include <catch2/catch.hpp>

#include "cli.h"

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

bool parse(std::vector<std::string> words, pv::args & a, std::string & err) {
    std::vector<char *> argv;
    words.insert(words.begin(), "tessera-plan-viewer");
    for (std::string & w : words) argv.push_back(&w[0]);
    a = pv::args();
    err.clear();
    return pv::parse_args((int) argv.size(), argv.data(), a, err);
}

bool contains(const std::string & s, const std::string & part) { return s.find(part) != std::string::npos; }

std::string tmp_prefix(const char * tag) {
    const char * dir = getenv("TMPDIR");
    return std::string(dir ? dir : "/tmp") + "/tsr_plan_viewer_" + tag + "_" + std::to_string((long) getpid());
}

} // namespace

TEST_CASE("plan-viewer: --tokens takes a whole number in [1, 4096] and names a bad one", "[plan-viewer]") {
    pv::args a;
    std::string err;
    REQUIRE(parse({"--tokens", "128", "--out", "x", "--trace", "t.csv"}, a, err));
    CHECK(a.tokens == 128);
    CHECK(a.prefix == "x");
    CHECK(a.trace == "t.csv");
    for (const char * bad : {"0", "abc", "-3", "4097", "12x", "", "99999999999999999999"}) {
        INFO("--tokens '" << bad << "'");
        CHECK_FALSE(parse({"--tokens", bad}, a, err));
        CHECK(contains(err, "--tokens '" + std::string(bad) + "' is not a whole number in [1, 4096]"));
    }
    CHECK_FALSE(parse({"--tokens"}, a, err));
    CHECK(err == "--tokens needs a value");
    CHECK_FALSE(parse({"--frobnicate"}, a, err));
    CHECK(err == "unknown argument '--frobnicate'");
}

TEST_CASE("plan-viewer: trace lines are checked and errors carry their line numbers", "[plan-viewer]") {
    std::vector<pv::trace_entry> e;
    std::string err;
    REQUIRE(pv::parse_trace("id,lower,upper,size\n7,0,3,100\n\n8,2,5,64\r\n", "t.csv", e, err));
    REQUIRE(e.size() == 2);
    CHECK(e[0].id == 7);
    CHECK(e[1].item.lower == 2);
    CHECK(e[1].item.upper == 5);
    CHECK(e[1].item.size == 64);
    // no header: the first line is data
    REQUIRE(pv::parse_trace("1,0,1,8\n", "t.csv", e, err));
    CHECK(e.size() == 1);

    struct bad_trace { const char * text; const char * error; };
    for (const bad_trace & b : {
             bad_trace{"id,lower,upper,size\n1,0,3,100\n2,1,4,-5\n", "t.csv: line 3: size '-5' is not a whole number in [0, "},
             bad_trace{"id,lower,upper,size\n1,0,3\n", "t.csv: line 2: expected 4 fields id,lower,upper,size, found 3"},
             bad_trace{"1,0,3,100\n\n2,1,x,5\n", "t.csv: line 3: upper 'x' is not a whole number"},
             bad_trace{"1,5,3,100\n", "t.csv: line 1: upper 3 is below lower 5"},
             bad_trace{"1,-1,3,100\n", "t.csv: line 1: lower '-1' is not a whole number in [0, 2147483647]"},
             bad_trace{"1,0,3,18446744073709551615\n", "t.csv: line 1: size '18446744073709551615' is not a whole number"},
             bad_trace{"id,lower,upper,size\n", "t.csv: no buffers in the trace"},
         }) {
        INFO(b.text);
        CHECK_FALSE(pv::parse_trace(b.text, "t.csv", e, err));
        INFO(err);
        CHECK(contains(err, b.error));
    }
}

TEST_CASE("plan-viewer: an unreadable trace and an unwritable output name the OS error", "[plan-viewer]") {
    std::string text, err;
    CHECK_FALSE(pv::read_file("/nonexistent/trace.csv", text, err));
    CHECK(err == "cannot read trace '/nonexistent/trace.csv': No such file or directory");
    CHECK_FALSE(pv::read_file("/", text, err));
    CHECK(err == "cannot read trace '/': Is a directory");

    const tsr_plan_tensor t = {nullptr, "a", 0, 0, 64, 0, 1, false, -1};
    const tsr_plan_buffer b = {64, 64, 64, 64};
    const tsr_plan plan = {1, &t, 1, &b, 2};
    CHECK_FALSE(pv::write_plan_files(&plan, "/nonexistent/dir/plan", err));
    CHECK(err == "cannot write '/nonexistent/dir/plan.json': No such file or directory");

    const std::string prefix = tmp_prefix("ok");
    REQUIRE(pv::write_plan_files(&plan, prefix, err));
    REQUIRE(pv::read_file(prefix + ".json", text, err));
    CHECK(contains(text, "\"a\""));
    REQUIRE(pv::read_file(prefix + ".svg", text, err));
    CHECK(contains(text, "<svg"));
    remove((prefix + ".json").c_str());
    remove((prefix + ".svg").c_str());
}
