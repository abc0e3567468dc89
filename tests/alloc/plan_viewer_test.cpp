// tessera-plan-viewer's inputs and outputs (examples/plan-viewer/cli.h): every bad
// argument, trace line and file names what is wrong (issue 15, item 8); the plan picture
// (tsr_plan_write_svg_panels) has what a reader needs (issue 16).
#include <catch2/catch.hpp>

#include "cli.h"
#include "tessera/backend.h"

#include <cmath>
#include <cstdio>
#include <map>
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
    REQUIRE(parse({"--graph", "unet"}, a, err));
    CHECK(a.graph == "unet");
    CHECK_FALSE(parse({"--graph", "resnet"}, a, err));
    CHECK(err == "--graph 'resnet' is not one of transformer, unet");
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
    const std::vector<tsr_plan_panel> panels = {tsr_plan_panel{&plan, "one"}};
    CHECK_FALSE(pv::write_plan_files(panels, "/nonexistent/dir/plan", err));
    CHECK(err == "cannot write '/nonexistent/dir/plan.json': No such file or directory");

    const std::string prefix = tmp_prefix("ok");
    REQUIRE(pv::write_plan_files(panels, prefix, err));
    REQUIRE(pv::read_file(prefix + ".json", text, err));
    CHECK(contains(text, "\"a\""));
    REQUIRE(pv::read_file(prefix + ".svg", text, err));
    CHECK(contains(text, "<svg"));
    remove((prefix + ".json").c_str());
    remove((prefix + ".svg").c_str());
}

namespace {

// ---- a small reader for the picture: elements by class, attributes by name ----

std::string attr(const std::string & tag, const std::string & name) {
    const size_t at = tag.find(" " + name + "=\"");
    if (at == std::string::npos) return "";
    const size_t from = at + name.size() + 3;
    return tag.substr(from, tag.find('"', from) - from);
}

double num(const std::string & tag, const std::string & name) { return atof(attr(tag, name).c_str()); }

// The text from `open` (an opening tag) to its matching `close`, for each occurrence.
std::vector<std::string> elements(const std::string & svg, const std::string & open, const std::string & close) {
    std::vector<std::string> out;
    for (size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
        const size_t end = svg.find(close, at);
        out.push_back(svg.substr(at, end == std::string::npos ? std::string::npos : end + close.size() - at));
    }
    return out;
}

// The first tag named `tag` ("<rect") inside `s`, up to its '>'.
std::string first_tag(const std::string & s, const std::string & tag) {
    const size_t at = s.find(tag + " ");
    return at == std::string::npos ? "" : s.substr(at, s.find('>', at) - at);
}

// Texts of <text class="cls"> elements inside s.
std::vector<std::string> texts(const std::string & s, const std::string & cls, std::vector<std::string> * tags = nullptr) {
    std::vector<std::string> out;
    for (const std::string & e : elements(s, "<text class=\"" + cls + "\"", "</text>")) {
        const size_t gt = e.find('>');
        out.push_back(e.substr(gt + 1, e.size() - gt - 1 - 7));
        if (tags) tags->push_back(e.substr(0, gt));
    }
    return out;
}

std::string unxml(std::string s) {
    for (auto rep : {std::make_pair("&lt;", "<"), std::make_pair("&gt;", ">"), std::make_pair("&quot;", "\""), std::make_pair("&amp;", "&")}) {
        for (size_t at = s.find(rep.first); at != std::string::npos; at = s.find(rep.first, at)) s.replace(at, strlen(rep.first), rep.second);
    }
    return s;
}

// What the picture must call a tensor, worked out here: its name, else op and shape.
std::string expected_label(const tsr_plan_tensor & t) {
    if (t.name && *t.name) return t.name;
    std::string s = tsr_op_desc(t.tensor);
    for (char & c : s) c = (char) tolower((unsigned char) c);
    int dims = 4;
    while (dims > 1 && t.tensor->ne[dims - 1] == 1) dims--;
    for (int d = 0; d < dims; d++) s += (d ? "x" : " ") + std::to_string((long long) t.tensor->ne[d]);
    return s;
}

// The U-Net-like graph of docs/memory-plan.md (reordering lowers its bound by a third),
// with one tiny tensor (16 bytes) and names on some tensors only.
tsr_cgraph * unet_like(tsr_context * ctx) {
    const int64_t n = 4096;
    tsr_tensor * skips[3];
    tsr_tensor * h = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, n);
    tsr_set_name(h, "input");
    tsr_set_input(h);
    for (int lv = 0; lv < 3; lv++) {
        h = skips[lv] = tsr_relu(ctx, tsr_scale(ctx, h, 1.5f));
        tsr_format_name(skips[lv], "skip%d", lv);
        h = tsr_sqr(ctx, h);
    }
    for (int lv = 2; lv >= 0; lv--) {
        tsr_tensor * a = tsr_concat(ctx, skips[lv], tsr_scale(ctx, skips[lv], -1.0f), 0);
        tsr_tensor * wide = tsr_concat(ctx, a, tsr_scale(ctx, a, 0.25f), 0);
        tsr_tensor * cat = tsr_concat(ctx, wide, tsr_scale(ctx, h, 0.5f), 0);
        h = tsr_cont(ctx, tsr_view_1d(ctx, tsr_relu(ctx, cat), n, (size_t) n * 4));
    }
    tsr_tensor * tiny = tsr_cont(ctx, tsr_view_1d(ctx, h, 4, 0));  // 16 bytes: must stay visible
    tsr_set_output(h);
    tsr_set_output(tiny);
    tsr_cgraph * gf = tsr_new_graph(ctx);
    tsr_build_forward_expand(gf, h);
    tsr_build_forward_expand(gf, tiny);
    return gf;
}

std::string write_svg(const std::vector<tsr_plan_panel> & panels) {
    FILE * f = tmpfile();
    REQUIRE(f);
    const bool ok = tsr_plan_write_svg_panels(panels.data(), (int) panels.size(), 0, f);
    INFO(tsr_last_error());
    REQUIRE(ok);
    std::string s((size_t) ftell(f), '\0');
    rewind(f);
    REQUIRE(fread(&s[0], 1, s.size(), f) == s.size());
    fclose(f);
    return s;
}

// One panel against its plan: ticks, every tensor once where its offset says, the lines.
void check_panel(const std::string & panel, const tsr_plan & plan, const char * caption) {
    const tsr_plan_buffer & pb = plan.buffers[0];
    const std::vector<std::string> cap = texts(panel, "panel-caption");
    REQUIRE(cap.size() == 1);
    CHECK(cap[0].find(caption) == 0);
    const std::string frame = first_tag(panel, "<rect class=\"frame\"");
    const double top = num(frame, "y"), bottom = top + num(frame, "height"), left = num(frame, "x");
    // steps: numbered from 0, increasing, within the plan
    const std::vector<std::string> xt = texts(panel, "tick-x");
    REQUIRE(xt.size() >= 3);
    CHECK(xt[0] == "0");
    for (size_t k = 1; k < xt.size(); k++) CHECK(atoi(xt[k].c_str()) > atoi(xt[k - 1].c_str()));
    CHECK(atoi(xt.back().c_str()) < plan.n_steps);
    // offsets: KiB for these sizes, from 0 in equal steps; the scale they give places every tensor
    std::vector<std::string> ytags;
    const std::vector<std::string> yt = texts(panel, "tick-y", &ytags);
    REQUIRE(yt.size() >= 3);
    for (const std::string & t : yt) CHECK(t.size() > 4);
    for (const std::string & t : yt) CHECK(t.substr(t.size() - 4) == " KiB");
    CHECK(yt[0] == "0 KiB");
    const double tick_kib = atof(yt[1].c_str());
    const double px_per_byte = (num(ytags[0], "y") - num(ytags[1], "y")) / (tick_kib * 1024);
    REQUIRE(px_per_byte > 0);
    const double y_zero = num(ytags[0], "y") - 3.5;  // the label sits 3.5 px under its tick
    CHECK(y_zero == Approx(bottom).margin(0.2));
    CHECK(atof(yt.back().c_str()) * 1024 >= (double) pb.planned_size);
    // tensors
    const std::vector<std::string> groups = elements(panel, "<g class=\"tensor\"", "</g>");
    CHECK((int) groups.size() == plan.n_tensors);
    std::map<int, int> seen;
    bool tiny_seen = false;
    for (const std::string & g : groups) {
        const int i = atoi(attr(g, "data-index").c_str());
        REQUIRE(i >= 0);
        REQUIRE(i < plan.n_tensors);
        seen[i]++;
        const tsr_plan_tensor & t = plan.tensors[i];
        const std::string label = expected_label(t);
        INFO("tensor " << i << " '" << label << "'");
        const std::string title = unxml(g.substr(g.find("<title>") + 7, g.find("</title>") - g.find("<title>") - 7));
        CHECK(title.find(label) == 0);
        CHECK(title.find("at offset " + std::to_string(t.offset) + ", " + std::to_string(t.size) + " bytes, live at steps " +
                         std::to_string(t.first) + "-" + std::to_string(t.last)) != std::string::npos);
        const std::vector<std::string> shown = texts(g, "label");
        if (!shown.empty()) {  // the label, or its start and ".."
            const std::string s = unxml(shown[0]);
            const bool whole = s == label, cut = s.size() > 2 && s.substr(s.size() - 2) == ".." && label.find(s.substr(0, s.size() - 2)) == 0;
            CHECK((whole || cut));
        }
        const std::string r = first_tag(g, "<rect");
        const double y = num(r, "y"), h = num(r, "height"), x = num(r, "x");
        CHECK(h >= 2.5);
        CHECK(x >= left - 0.01);
        CHECK(y + h == Approx(bottom - px_per_byte * (double) t.offset).margin(0.05));
        if (t.size >= 1024) CHECK(h == Approx(px_per_byte * (double) t.size).margin(0.05));
        if (t.size <= 64) tiny_seen = true;  // 16 bytes, aligned
    }
    CHECK(tiny_seen);
    for (int i = 0; i < plan.n_tensors; i++) CHECK(seen[i] == 1);
    // the bounds: lines inside the frame, not on it, captioned with their sizes
    auto line_y = [&](const char * cls, const std::string & caption_text) {
        const std::vector<std::string> g = elements(panel, std::string("<g class=\"") + cls + "\"", "</g>");
        REQUIRE(g.size() == 1);
        CHECK(g[0].find(">" + caption_text + "</text>") != std::string::npos);
        return num(first_tag(g[0], "<line"), "y1");
    };
    auto kib = [](size_t b) { char buf[32]; snprintf(buf, sizeof buf, "%.0f KiB", (double) b / 1024); return std::string(buf); };
    const double lb_y = line_y("lower-bound", "lower bound " + kib(pb.lower_bound));
    const double pl_y = line_y("planned", "planned " + kib(pb.planned_size));
    CHECK(lb_y == Approx(bottom - px_per_byte * (double) pb.lower_bound).margin(0.05));
    CHECK(pl_y == Approx(bottom - px_per_byte * (double) pb.planned_size).margin(0.05));
    CHECK(pl_y > top + 5);
}

} // namespace

TEST_CASE("plan picture: axes, ticks, legend, every tensor once per panel, the bounds captioned", "[plan-viewer]") {
    tsr_init_params ip = {256 * tsr_tensor_overhead() + tsr_graph_overhead(), nullptr, true};
    tsr_context * ctx = tsr_init(ip);
    REQUIRE(ctx);
    tsr_cgraph * gf = unet_like(ctx);
    tsr_gallocr_t builder = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    tsr_gallocr_t optimised = tsr_gallocr_new(tsr_backend_cpu_buffer_type());
    REQUIRE(tsr_gallocr_reserve(builder, gf));
    REQUIRE(tsr_graph_optimize_order(gf, nullptr));
    REQUIRE(tsr_gallocr_reserve(optimised, gf));
    const tsr_plan * before = tsr_gallocr_get_plan(builder);
    const tsr_plan * after = tsr_gallocr_get_plan(optimised);
    REQUIRE(after->buffers[0].lower_bound < before->buffers[0].lower_bound);  // the panels differ

    const std::string svg = write_svg({tsr_plan_panel{before, "builder order"}, tsr_plan_panel{after, "optimised order"}});
    const std::vector<std::string> legend = elements(svg, "<g class=\"legend\"", "</g>");
    REQUIRE(legend.size() == 1);
    const std::vector<std::string> entries = texts(legend[0], "legend-label");
    for (const char * kind : {"input / leaf", "element-wise", "copy / concat / layout", "lower bound", "planned size"}) {
        INFO(kind);
        CHECK(std::find(entries.begin(), entries.end(), kind) != entries.end());
    }
    CHECK(std::find(entries.begin(), entries.end(), "matrix multiply") == entries.end());  // only kinds drawn
    CHECK(elements(legend[0], "<rect class=\"legend-swatch\"", ">").size() == entries.size() - 2);
    std::vector<std::string> panels = elements(svg, "<g class=\"panel\"", "</svg>");  // each to the end: cut at the next
    for (size_t k = 0; k + 1 < panels.size(); k++) panels[k].resize(panels[k].size() - panels[k + 1].size());
    REQUIRE(panels.size() == 2);
    {
        INFO("builder panel");
        check_panel(panels[0], *before, "builder order: planned ");
    }
    {
        INFO("optimised panel");
        check_panel(panels[1], *after, "optimised order: planned ");
    }
    tsr_gallocr_free(builder);
    tsr_gallocr_free(optimised);
    tsr_free(ctx);
}

TEST_CASE("plan picture: bad panels are refused with the bad value named", "[plan-viewer]") {
    const tsr_plan_tensor t = {nullptr, "a", 0, 0, 64, 0, 1, false, -1};
    const tsr_plan_buffer b = {64, 64, 64, 64};
    const tsr_plan plan = {1, &t, 1, &b, 2};
    const tsr_plan_panel good = {&plan, "x"}, no_plan = {nullptr, "y"};
    FILE * f = tmpfile();
    REQUIRE(f);
    CHECK_FALSE(tsr_plan_write_svg_panels(nullptr, 1, 0, f));
    CHECK(contains(tsr_last_error(), "no panels"));
    CHECK_FALSE(tsr_plan_write_svg_panels(&good, 0, 0, f));
    CHECK(contains(tsr_last_error(), "n_panels 0"));
    const tsr_plan_panel two[2] = {good, no_plan};
    CHECK_FALSE(tsr_plan_write_svg_panels(two, 2, 0, f));
    CHECK(contains(tsr_last_error(), "panel 1 has no plan"));
    CHECK_FALSE(tsr_plan_write_svg_panels(&good, 1, 3, f));
    CHECK(contains(tsr_last_error(), "buffer 3 does not exist (plan of panel 0 has 1)"));
    CHECK(ftell(f) == 0);  // nothing written
    CHECK(tsr_plan_write_svg_panels(&good, 1, 0, f));
    fclose(f);
}
