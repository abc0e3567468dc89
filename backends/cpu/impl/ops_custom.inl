/*
 * ops_custom.inl - user-defined ops on the CPU (issue 17 part A): the callback stored in
 * op_params, called by the first min(n_tasks, nth) threads of the node with their (ith,
 * nth), as ggml's CPU backend does.
 */
namespace {
namespace tcpu {

static void op_custom(const cparams & p, tsr_tensor * dst) {
    const tsr_impl::custom_params cp = tsr_impl::get_custom_params(dst);
    const int nth = cp.n_tasks == TSR_N_TASKS_MAX ? p.nth : std::min(cp.n_tasks, p.nth);
    if (p.ith >= nth) return;
    const tsr_tensor * a = dst->src[0];
    const tsr_tensor * b = dst->src[1];
    const tsr_tensor * c = dst->src[2];
    switch (dst->op) {
        case TSR_OP_MAP_CUSTOM1: reinterpret_cast<tsr_custom1_op_t>(cp.fun)(dst, a, p.ith, nth, cp.userdata); break;
        case TSR_OP_MAP_CUSTOM2: reinterpret_cast<tsr_custom2_op_t>(cp.fun)(dst, a, b, p.ith, nth, cp.userdata); break;
        case TSR_OP_MAP_CUSTOM3: reinterpret_cast<tsr_custom3_op_t>(cp.fun)(dst, a, b, c, p.ith, nth, cp.userdata); break;
        default: reinterpret_cast<tsr_custom_op_t>(cp.fun)(dst, p.ith, nth, cp.userdata); break;
    }
}

} // namespace tcpu
} // namespace
