// Shared by every tessera Vulkan shader: extensions, the generic push-constant block and
// the flat-index helpers. Strides and offsets are in elements of each binding's type.
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require

#ifndef TSR_CUSTOM_PC
layout(push_constant) uniform PC {
    uint ne00, ne01, ne02, ne03;  uint nb00, nb01, nb02, nb03;   // src0
    uint ne10, ne11, ne12, ne13;  uint nb10, nb11, nb12, nb13;   // src1
    uint ne0,  ne1,  ne2,  ne3;   uint nb0,  nb1,  nb2,  nb3;    // dst
    int  off0, off1, offd;        uint row0;                     // binding offsets, first dst row
    float p0, p1;                 uint nrows, u0;                // op params, rows in this dispatch
} pc;
#endif

// Large 1-D grids are dispatched as (TSR_GRID_X, y) workgroups (the host uses the same
// constant). Elementwise shaders use local_size_x = TSR_WG (gl_WorkGroupSize is not yet
// known where this file is included).
#define TSR_GRID_X 4096u
#define TSR_WG 256u
// Linear workgroup index over the grid.
uint tsr_flat_group() {
    return gl_WorkGroupID.x + gl_WorkGroupID.y * TSR_GRID_X;
}
// Linear invocation index over the grid.
uint tsr_flat_id() {
    return tsr_flat_group() * TSR_WG + gl_LocalInvocationID.x;
}

float tsr_gelu(float x) {
    const float c = 0.7978845608028654; // sqrt(2/pi)
    float t = tanh(clamp(c * x * (1.0 + 0.044715 * x * x), -15.0, 15.0));
    return 0.5 * x * (1.0 + t);
}
float tsr_silu(float x) { return x / (1.0 + exp(-x)); }
// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7; GLSL has none); +-1 at +-inf, NaN kept
float tsr_erf(float x) {
    float t = 1.0 / (1.0 + 0.3275911 * abs(x));
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return isnan(x) ? x : (x < 0.0 ? -y : y);
}
float tsr_gelu_erf(float x) { return 0.5 * x * (1.0 + tsr_erf(x * 0.70710678118654752)); }
float tsr_gelu_quick(float x) { return x / (1.0 + exp(-1.702 * x)); }
// exp(x) - 1 without the cancellation near 0 (a Taylor series there)
float tsr_expm1(float x) { return abs(x) < 1e-2 ? x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0)))) : exp(x) - 1.0; }
