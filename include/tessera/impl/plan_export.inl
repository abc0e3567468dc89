/*
 * plan_export.inl - a plan as JSON (every tensor and the totals) and as an SVG picture
 * (steps on x, offsets on y, one rectangle per tensor, its name on hover).
 */

#include <cstdio>

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

TSR_API_IMPL bool tsr_plan_write_svg(const struct tsr_plan * plan, int buffer_id, FILE * out) {
    if (!plan || !out) return tsr_set_error("tsr_plan_write_svg: NULL plan or file");
    if (buffer_id < 0 || buffer_id >= plan->n_buffers) {
        return tsr_set_error("tsr_plan_write_svg: buffer %d does not exist (plan has %d)", buffer_id, plan->n_buffers);
    }
    const struct tsr_plan_buffer & pb = plan->buffers[buffer_id];
    const double W = 1000.0, H = 600.0, M = 40.0;
    const double steps = plan->n_steps > 0 ? (double) plan->n_steps : 1.0;
    const double bytes = pb.planned_size > 0 ? (double) pb.planned_size : 1.0;
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n",
            W + 2 * M, H + 2 * M, W + 2 * M, H + 2 * M);
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#f8f8f8\" stroke=\"#333\"/>\n", M, M, W, H);
    const double ylb = M + H - H * (double) pb.lower_bound / bytes;
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#c00\" stroke-dasharray=\"4 3\"><title>lower bound %zu bytes</title></line>\n",
            M, ylb, M + W, ylb, pb.lower_bound);
    for (int i = 0; i < plan->n_tensors; i++) {
        const struct tsr_plan_tensor & t = plan->tensors[i];
        if (t.buffer_id != buffer_id) continue;
        const double x = M + W * (double) t.first / steps;
        const double w = W * (double) (t.last - t.first + 1) / steps;
        const double y = M + H - H * (double) (t.offset + t.size) / bytes;
        const double h = H * (double) t.size / bytes;
        const unsigned hue = (unsigned) ((i * 47) % 360);
        fprintf(out, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"hsl(%u,60%%,65%%)\" stroke=\"#222\" stroke-width=\"0.3\"><title>",
                x, y, w, h, hue);
        tsr_impl::px_escape(out, t.name, true);
        fprintf(out, " | offset %zu, %zu bytes, steps %d-%d%s</title></rect>\n", t.offset, t.size, t.first, t.last,
                t.inplace ? ", in place" : "");
    }
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"13\">buffer %d: %zu bytes planned, lower bound %zu, %d steps</text>\n",
            M, M - 12, buffer_id, pb.planned_size, pb.lower_bound, plan->n_steps);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-family=\"sans-serif\" font-size=\"12\">step</text>\n", M + W / 2, M + H + 25);
    fprintf(out, "</svg>\n");
    if (ferror(out)) return tsr_set_error("tsr_plan_write_svg: write error");
    return true;
}
