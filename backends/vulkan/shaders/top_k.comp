#version 450
// top_k: per row of src0 (F32), the indices (I32) of the k = dst ne0 largest values, largest
// first; ties by lower index, NaN the largest (argsort's order on the CPU). One workgroup per
// row; step j picks the best element ordered after the one step j-1 picked (a total order,
// so no element is picked twice): k reductions over the row, for the small k of sampling.
#include "common.glsl"
layout(local_size_x = TSR_WG) in;
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 3) buffer D { int d[]; };
shared float sv[256];
shared uint si[256];

const uint NONE = 0xffffffffu;

// x (value vx at index ix) comes before y in the descending order; NONE comes last
bool before(float vx, uint ix, float vy, uint iy) {
    if (iy == NONE) return ix != NONE;
    if (ix == NONE) return false;
    bool nx = isnan(vx), ny = isnan(vy);
    if (nx || ny) return nx != ny ? nx : ix < iy;
    return vx > vy || (vx == vy && ix < iy);
}

void main() {
    uint grp = tsr_flat_group();
    if (grp >= pc.nrows) return;
    uint r = pc.row0 + grp;
    uint i1 = r % pc.ne01; r /= pc.ne01;
    uint i2 = r % pc.ne02; uint i3 = r / pc.ne02;
    int ba = pc.off0 + int(i1*pc.nb01 + i2*pc.nb02 + i3*pc.nb03);
    int bd = pc.offd + int(i1*pc.nb1 + i2*pc.nb2 + i3*pc.nb3);
    uint t = gl_LocalInvocationID.x;
    float pv = 0.0;
    uint pi = NONE;   // the element picked last (NONE: none yet)
    for (uint j = 0; j < pc.ne0; ++j) {
        float bv = 0.0;
        uint bi = NONE;
        for (uint i = t; i < pc.ne00; i += 256) {
            float v = a[ba + int(i*pc.nb00)];
            if ((pi == NONE || before(pv, pi, v, i)) && before(v, i, bv, bi)) { bv = v; bi = i; }
        }
        sv[t] = bv; si[t] = bi;
        barrier();
        for (uint s = 128; s > 0; s >>= 1) {
            if (t < s && before(sv[t + s], si[t + s], sv[t], si[t])) { sv[t] = sv[t + s]; si[t] = si[t + s]; }
            barrier();
        }
        pv = sv[0]; pi = si[0];
        if (t == 0) d[bd + int(j*pc.nb0)] = int(pi);
        barrier();
    }
}
