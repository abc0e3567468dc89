/*
 * plan_export.inl - a plan as JSON (every tensor and the totals) and as an SVG picture a
 * person can read: steps on x and offsets on y with numbered ticks, one rectangle per
 * tensor coloured by the kind of op that made it and labelled where the label fits (a
 * hover title always), the lower bound and the planned size marked and captioned, and
 * several plans of one graph (builder order, optimised order) as panels on one scale.
 */

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

TSR_IMPL_NS_BEGIN
namespace {

static void px_escape(FILE * f, const char * s, bool xml) {
    for (; s && *s; s++) {
        const unsigned char c = (unsigned char) *s;
        if (xml) {
            if (c == '<') fputs("&lt;", f);
            else if (c == '>') fputs("&gt;", f);
            else if (c == '&') fputs("&amp;", f);
            else if (c == '"') fputs("&quot;", f);
            else if (c < 0x20) fputc(' ', f);
            else fputc(c, f);
        } else {
            if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
            else if (c < 0x20) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
        }
    }
}

/* ---- the picture's vocabulary: op kinds and their colours ---- */

enum px_kind { PX_INPUT, PX_MATMUL, PX_CONV, PX_NORM, PX_ATTENTION, PX_ELEMENTWISE, PX_LAYOUT, PX_OTHER, PX_BUFFER, PX_N_KINDS };

struct px_kind_style { const char * name; const char * fill; };

/* Light fills, so the dark labels stay readable on every kind. */
static const px_kind_style px_kind_styles[PX_N_KINDS] = {
    {"input / leaf", "#d0d0d0"},          {"matrix multiply", "#8db4e2"},  {"conv / pool / resize", "#f7b267"},
    {"normalisation", "#a8d5a2"},         {"softmax / attention / rope", "#f29e9e"},
    {"element-wise", "#ffe08a"},          {"copy / concat / layout", "#c3b1e1"},
    {"other op", "#e3b5cf"},              {"trace buffer", "#9fd3d9"},
};

static px_kind px_kind_of(const struct tsr_tensor * t) {
    if (!t) return PX_BUFFER;
    switch (t->op) {
        case TSR_OP_NONE: return PX_INPUT;
        case TSR_OP_MUL_MAT: case TSR_OP_OUT_PROD: return PX_MATMUL;
        case TSR_OP_CONV_2D: case TSR_OP_IM2COL: case TSR_OP_POOL_2D: case TSR_OP_UPSCALE: case TSR_OP_PAD: return PX_CONV;
        case TSR_OP_NORM: case TSR_OP_RMS_NORM: case TSR_OP_GROUP_NORM: return PX_NORM;
        case TSR_OP_SOFT_MAX: case TSR_OP_FLASH_ATTN_EXT: case TSR_OP_DIAG_MASK_INF: case TSR_OP_ROPE: return PX_ATTENTION;
        case TSR_OP_ADD: case TSR_OP_SUB: case TSR_OP_MUL: case TSR_OP_DIV: case TSR_OP_SQR: case TSR_OP_SQRT: case TSR_OP_LOG:
        case TSR_OP_SCALE: case TSR_OP_CLAMP: case TSR_OP_UNARY: case TSR_OP_GLU: return PX_ELEMENTWISE;
        case TSR_OP_DUP: case TSR_OP_CPY: case TSR_OP_CONT: case TSR_OP_CONCAT: case TSR_OP_REPEAT: case TSR_OP_GET_ROWS:
        case TSR_OP_SET_ROWS: case TSR_OP_RESHAPE: case TSR_OP_VIEW: case TSR_OP_PERMUTE: case TSR_OP_TRANSPOSE: return PX_LAYOUT;
        default: return PX_OTHER;
    }
}

/* What a rectangle says: the tensor's name, or its op and shape when it has none. */
static std::string px_label(const struct tsr_plan_tensor & t) {
    if (t.name && *t.name) return t.name;
    if (!t.tensor) return "unnamed";
    std::string s = tsr_op_desc(t.tensor);
    std::transform(s.begin(), s.end(), s.begin(), [](char c) { return (char) tolower((unsigned char) c); });
    int dims = TSR_MAX_DIMS;
    while (dims > 1 && t.tensor->ne[dims - 1] == 1) dims--;
    for (int d = 0; d < dims; d++) s += (d ? "x" : " ") + std::to_string((long long) t.tensor->ne[d]);
    return s;
}

/* ---- axes: round tick steps and byte units ---- */

/* The 1, 2 or 5 times a power of ten nearest above span / target. */
static double px_nice_step(double span, int target) {
    const double raw = span / (double) std::max(1, target);
    const double p = std::pow(10.0, std::floor(std::log10(raw > 0 ? raw : 1.0)));
    for (double m : {1.0, 2.0, 5.0}) if (m * p >= raw) return m * p;
    return 10.0 * p;
}

struct px_unit { double bytes; const char * name; };

/* The largest of B, KiB, MiB, GiB that `bytes` holds at least once. */
static px_unit px_unit_for(double bytes) {
    static const px_unit units[4] = {{1073741824.0, "GiB"}, {1048576.0, "MiB"}, {1024.0, "KiB"}, {1.0, "B"}};
    for (const px_unit & u : units) if (bytes >= u.bytes) return u;
    return units[3];
}

static std::string px_number(double v, int decimals) {
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", std::max(0, decimals), v);
    return buf;
}

/* "1.50 MiB": three significant digits in the largest unit that fits. */
static std::string px_bytes(double bytes) {
    const px_unit u = px_unit_for(bytes);
    const double v = bytes / u.bytes;
    return px_number(v, u.bytes == 1.0 ? 0 : v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + u.name;
}

static int px_decimals(double step) { return step >= 1.0 ? 0 : (int) std::ceil(-std::log10(step) - 1e-9); }

/* ---- layout ---- */

struct px_layout {
    double left = 86, plot_w = 1000, right = 170;  /* right: the captions of the bound lines */
    double legend_h = 0, panel_top = 34, plot_h = 330, panel_bottom = 52;
    double y_top_bytes = 1;                          /* bytes at the top of every panel's offset axis */
    double tick_bytes = 1;
    px_unit unit = {1.0, "B"};
    double width() const { return left + plot_w + right; }
    double panel_h() const { return panel_top + plot_h + panel_bottom; }
    double plot_y(int panel) const { return legend_h + panel * panel_h() + panel_top; }
    double y_of(int panel, double bytes) const { return plot_y(panel) + plot_h - plot_h * bytes / y_top_bytes; }
};

static const double px_char_w = 5.9;     /* width of one character of the 10 px labels */
static const double px_min_h = 2.5;      /* tiny tensors stay visible */

static void px_text(FILE * f, double x, double y, const char * cls, const char * anchor, int size, const std::string & s) {
    fprintf(f, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", cls, x, y, size, anchor);
    px_escape(f, s.c_str(), true);
    fputs("</text>\n", f);
}

/* The kinds present, left to right, then the two bound lines. */
static void px_write_legend(FILE * f, const px_layout & L, const bool (&present)[PX_N_KINDS]) {
    fputs("<g class=\"legend\">\n", f);
    double x = L.left, y = 20;
    auto advance = [&](double w) {
        if (x + w > L.width() - 10) { x = L.left; y += 18; }
        const double at = x;
        x += w;
        return at;
    };
    for (int k = 0; k < PX_N_KINDS; k++) {
        if (!present[k]) continue;
        const std::string name = px_kind_styles[k].name;
        const double at = advance(24 + px_char_w * 1.1 * (double) name.size() + 18);
        fprintf(f, "<rect class=\"legend-swatch\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"11\" fill=\"%s\" stroke=\"#555\" stroke-width=\"0.5\"/>\n",
                at, y - 9, px_kind_styles[k].fill);
        px_text(f, at + 21, y, "legend-label", "start", 11, name);
    }
    double at = advance(150);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"5 3\"/>\n", at, y - 4, at + 18, y - 4);
    px_text(f, at + 23, y, "legend-label", "start", 11, "lower bound");
    at = advance(150);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f3a93\" stroke-width=\"1.5\"/>\n", at, y - 4, at + 18, y - 4);
    px_text(f, at + 23, y, "legend-label", "start", 11, "planned size");
    fputs("</g>\n", f);
}

static void px_write_axes(FILE * f, const px_layout & L, int panel, int n_steps) {
    const double x0 = L.left, y0 = L.plot_y(panel), w = L.plot_w, h = L.plot_h;
    fprintf(f, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#fafafa\" stroke=\"#888\" stroke-width=\"0.8\"/>\n", x0, y0, w, h);
    /* offsets: one unit for every panel, ticks on round numbers of it */
    fputs("<g class=\"axis-y\">\n", f);
    const int ydec = px_decimals(L.tick_bytes / L.unit.bytes);
    for (double b = 0; b <= L.y_top_bytes * (1 + 1e-9); b += L.tick_bytes) {
        const double y = L.y_of(panel, b);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e4e4e4\" stroke-width=\"0.6\"/>\n", x0, y, x0 + w, y);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>\n", x0 - 5, y, x0, y);
        px_text(f, x0 - 8, y + 3.5, "tick-y", "end", 10, px_number(b / L.unit.bytes, ydec) + " " + L.unit.name);
    }
    fprintf(f, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 %.1f %.1f)\">offset in the buffer</text>\n",
            x0 - 64, y0 + h / 2, x0 - 64, y0 + h / 2);
    fputs("</g>\n<g class=\"axis-x\">\n", f);
    /* steps: a column per step, ticks at its middle */
    const double sw = w / (double) std::max(1, n_steps);
    const int every = std::max(1, (int) px_nice_step((double) n_steps, 20));
    for (int s = 0; s < n_steps; s += every) {
        const double x = x0 + sw * ((double) s + 0.5);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\"/>\n", x, y0 + h, x, y0 + h + 5);
        px_text(f, x, y0 + h + 17, "tick-x", "middle", 10, std::to_string(s));
    }
    px_text(f, x0 + w / 2, y0 + h + 36, "axis-label", "middle", 11, "step (node in execution order)");
    fputs("</g>\n", f);
}

/* The longest prefix of label (with "..") that fits width, or "" when too little does. */
static std::string px_fit(const std::string & label, double width) {
    const size_t chars = (size_t) std::max(0.0, (width - 4) / px_char_w);
    if (label.size() <= chars) return label;
    if (chars < 5) return "";
    return label.substr(0, chars - 2) + "..";
}

/* One tensor: a group with its hover title, its rectangle and its label where it fits.
 * A tensor taken over in place ends, and its successor starts, in the middle of the
 * step they share, so neither hides the other. */
static void px_write_tensor(FILE * f, const px_layout & L, int panel, const struct tsr_plan & plan, int i, bool taken_over) {
    const struct tsr_plan_tensor & t = plan.tensors[i];
    const double sw = L.plot_w / (double) std::max(1, plan.n_steps);
    const double x1 = L.left + sw * ((double) t.first + (t.inplace ? 0.5 : 0.0));
    const double x2 = L.left + sw * ((double) t.last + (taken_over ? 0.5 : 1.0));
    const double ybot = L.y_of(panel, (double) t.offset);
    const double h = std::max(px_min_h, ybot - L.y_of(panel, (double) (t.offset + t.size)));
    const double w = std::max(1.0, x2 - x1);
    const std::string label = px_label(t);
    const px_kind kind = px_kind_of(t.tensor);
    fprintf(f, "<g class=\"tensor\" data-index=\"%d\"><title>", i);
    px_escape(f, label.c_str(), true);
    if (t.tensor && t.name && *t.name) fprintf(f, " (%s)", tsr_op_desc(t.tensor));
    fprintf(f, ": %s at offset %zu, %zu bytes, live at steps %d-%d%s</title>\n", px_bytes((double) t.size).c_str(), t.offset, t.size,
            t.first, t.last, t.inplace ? ", in place of a dying operand" : "");
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.6\"/>\n", x1,
            ybot - h, w, h, px_kind_styles[kind].fill);
    const std::string shown = h >= 12 ? px_fit(label, w) : "";
    if (!shown.empty()) px_text(f, x1 + 2, ybot - h / 2 + 3.5, "label", "start", 10, shown);
    fputs("</g>\n", f);
}

/* A horizontal line across the plot with its caption in the right margin. */
static void px_write_bound(FILE * f, const px_layout & L, int panel, const char * cls, const char * stroke, const char * dash,
                           size_t bytes, const std::string & caption, double caption_dy) {
    const double y = L.y_of(panel, (double) bytes);
    fprintf(f, "<g class=\"%s\"><line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"1.5\"%s/>\n", cls,
            L.left, y, L.left + L.plot_w + 6, y, stroke, dash);
    fprintf(f, "<text x=\"%.1f\" y=\"%.2f\" font-size=\"11\" fill=\"%s\">", L.left + L.plot_w + 9, y + caption_dy, stroke);
    px_escape(f, caption.c_str(), true);
    fputs("</text></g>\n", f);
}

static void px_write_panel(FILE * f, const px_layout & L, int panel, const struct tsr_plan_panel & pp, int buffer_id) {
    const struct tsr_plan & plan = *pp.plan;
    const struct tsr_plan_buffer & pb = plan.buffers[buffer_id];
    fprintf(f, "<g class=\"panel\" id=\"panel-%d\">\n", panel);
    std::string caption = pp.caption && *pp.caption ? std::string(pp.caption) + ": " : std::string();
    caption += "planned " + px_bytes((double) pb.planned_size) + ", lower bound " + px_bytes((double) pb.lower_bound) + ", " +
               std::to_string(plan.n_steps) + " steps";
    if (plan.n_buffers > 1) caption += " (buffer " + std::to_string(buffer_id) + ")";
    fprintf(f, "<text class=\"panel-caption\" x=\"%.1f\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">", L.left, L.plot_y(panel) - 12);
    px_escape(f, caption.c_str(), true);
    fputs("</text>\n", f);
    px_write_axes(f, L, panel, plan.n_steps);
    std::vector<char> taken_over((size_t) plan.n_tensors, 0);
    for (int i = 0; i < plan.n_tensors; i++) {
        const int of = plan.tensors[i].inplace_of;
        if (of >= 0 && of < plan.n_tensors) taken_over[(size_t) of] = 1;
    }
    for (int i = 0; i < plan.n_tensors; i++) {
        if (plan.tensors[i].buffer_id == buffer_id) px_write_tensor(f, L, panel, plan, i, taken_over[(size_t) i] != 0);
    }
    /* both captions stay readable when the lines (nearly) coincide */
    const double gap = L.y_of(panel, (double) pb.lower_bound) - L.y_of(panel, (double) pb.planned_size);
    const bool close = gap < 13;
    px_write_bound(f, L, panel, "planned", "#1f3a93", "", pb.planned_size, "planned " + px_bytes((double) pb.planned_size),
                   close ? -4.0 : 4.0);
    px_write_bound(f, L, panel, "lower-bound", "#c00", " stroke-dasharray=\"5 3\"", pb.lower_bound,
                   "lower bound " + px_bytes((double) pb.lower_bound), close ? 12.0 + gap : 4.0);
    fputs("</g>\n", f);
}

/* One scale for every panel: room above the largest planned size, so no line sits on
 * the frame. */
static px_layout px_layout_for(const struct tsr_plan_panel * panels, int n, int buffer_id, bool (&present)[PX_N_KINDS]) {
    px_layout L;
    double top = 1;
    for (int p = 0; p < n; p++) {
        const struct tsr_plan & plan = *panels[p].plan;
        top = std::max(top, (double) std::max(plan.buffers[buffer_id].planned_size, plan.buffers[buffer_id].lower_bound));
        for (int i = 0; i < plan.n_tensors; i++) {
            if (plan.tensors[i].buffer_id == buffer_id) present[px_kind_of(plan.tensors[i].tensor)] = true;
        }
    }
    L.unit = px_unit_for(top);
    L.tick_bytes = px_nice_step(top * 1.08 / L.unit.bytes, 6) * L.unit.bytes;  /* round in the unit shown */
    if (L.unit.bytes == 1.0) L.tick_bytes = std::max(1.0, std::round(L.tick_bytes));
    L.y_top_bytes = std::ceil(top * 1.08 / L.tick_bytes) * L.tick_bytes;
    int kinds = 0;
    for (bool k : present) kinds += k;
    L.legend_h = 36 + 18 * (double) ((kinds + 2) / 6);
    return L;
}

static bool px_check_panels(const struct tsr_plan_panel * panels, int n, int buffer_id) {
    if (!panels || n < 1) return tsr_set_error("tsr_plan_write_svg_panels: no panels (panels %p, n_panels %d)", (const void *) panels, n);
    for (int p = 0; p < n; p++) {
        const struct tsr_plan * plan = panels[p].plan;
        if (!plan) return tsr_set_error("tsr_plan_write_svg_panels: panel %d has no plan", p);
        if (buffer_id < 0 || buffer_id >= plan->n_buffers) {
            return tsr_set_error("tsr_plan_write_svg: buffer %d does not exist (plan of panel %d has %d)", buffer_id, p, plan->n_buffers);
        }
    }
    return true;
}

} // namespace
TSR_IMPL_NS_END

TSR_API_IMPL bool tsr_plan_write_json(const struct tsr_plan * plan, FILE * out) {
    if (!plan || !out) return tsr_set_error("tsr_plan_write_json: NULL plan or file");
    fprintf(out, "{\n  \"n_steps\": %d,\n  \"buffers\": [", plan->n_steps);
    for (int b = 0; b < plan->n_buffers; b++) {
        const struct tsr_plan_buffer & pb = plan->buffers[b];
        fprintf(out, "%s\n    {\"id\": %d, \"planned_size\": %zu, \"lower_bound\": %zu, \"no_reuse_size\": %zu, \"alignment\": %zu}",
                b ? "," : "", b, pb.planned_size, pb.lower_bound, pb.no_reuse_size, pb.alignment);
    }
    fprintf(out, "\n  ],\n  \"tensors\": [");
    for (int i = 0; i < plan->n_tensors; i++) {
        const struct tsr_plan_tensor & t = plan->tensors[i];
        fprintf(out, "%s\n    {\"name\": \"", i ? "," : "");
        tsr_impl::px_escape(out, t.name, false);
        fprintf(out, "\", \"buffer\": %d, \"offset\": %zu, \"size\": %zu, \"first\": %d, \"last\": %d, \"inplace_of\": %d}",
                t.buffer_id, t.offset, t.size, t.first, t.last, t.inplace_of);
    }
    fprintf(out, "\n  ]\n}\n");
    if (ferror(out)) return tsr_set_error("tsr_plan_write_json: write error");
    return true;
}

TSR_API_IMPL bool tsr_plan_write_svg_panels(const struct tsr_plan_panel * panels, int n_panels, int buffer_id, FILE * out) {
    if (!out) return tsr_set_error("tsr_plan_write_svg_panels: NULL file");
    if (!tsr_impl::px_check_panels(panels, n_panels, buffer_id)) return false;
    try {
        bool present[tsr_impl::PX_N_KINDS] = {};
        const tsr_impl::px_layout L = tsr_impl::px_layout_for(panels, n_panels, buffer_id, present);
        const double H = L.legend_h + n_panels * L.panel_h();
        fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
                L.width(), H, L.width(), H);
        fprintf(out, "<rect width=\"%.0f\" height=\"%.0f\" fill=\"#fff\"/>\n", L.width(), H);
        tsr_impl::px_write_legend(out, L, present);
        for (int p = 0; p < n_panels; p++) tsr_impl::px_write_panel(out, L, p, panels[p], buffer_id);
        fputs("</svg>\n", out);
    } catch (...) {
        return tsr_set_error("tsr_plan_write_svg_panels: out of memory");
    }
    if (ferror(out)) return tsr_set_error("tsr_plan_write_svg: write error");
    return true;
}

TSR_API_IMPL bool tsr_plan_write_svg(const struct tsr_plan * plan, int buffer_id, FILE * out) {
    if (!plan || !out) return tsr_set_error("tsr_plan_write_svg: NULL plan or file");
    const struct tsr_plan_panel panel = {plan, nullptr};
    return tsr_plan_write_svg_panels(&panel, 1, buffer_id, out);
}
