#version 450
// Tiled shared-memory GEMM: a (16*TM) x (16*TM) output tile per workgroup of 256
// invocations, each computing TM x TM outputs (TM, a specialization constant: 4 for a
// 64x64 tile, 8 for 128x128 on large products).
#include "mul_mat_common.glsl"
#define BK 8
#define TMAX 8
layout(local_size_x = TSR_WG) in;
layout(constant_id = 0) const uint TM = 4;
const uint TILE = 16u * TM;
shared float As[BK][16 * TMAX + 4];
shared float Bs[BK][16 * TMAX + 4];

void main() {
    uint t  = gl_LocalInvocationID.x;
    uint tx = t % 16u, ty = t / 16u;
    uint mt = gl_WorkGroupID.x * TILE, nt = gl_WorkGroupID.y * TILE;
    uint batch = gl_WorkGroupID.z;
    uint i12 = batch % pc.ne12, i13 = batch / pc.ne12;
    int bb = pc.off1 + int(i12 * pc.nb12 + i13 * pc.nb13);
    float acc[TMAX][TMAX];
    for (uint i = 0; i < TM; i++) for (uint j = 0; j < TM; j++) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < pc.K; k0 += BK) {
        for (uint e = t; e < TILE * BK; e += TSR_WG) {
            uint kk = e % BK, mm = e / BK;
            uint m = mt + mm, k = k0 + kk;
            As[kk][mm] = (m < pc.M && k < pc.K) ? load_a(a_row(m, i12, i13), k) : 0.0;
        }
        for (uint e = t; e < TILE * BK; e += TSR_WG) {
            uint kk = e % BK, nn = e / BK;
            uint n = nt + nn, k = k0 + kk;
            Bs[kk][nn] = (n < pc.N && k < pc.K) ? b[bb + int(n * pc.nb11 + k)] : 0.0;
        }
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float av[TMAX], bv[TMAX];
            for (uint i = 0; i < TM; i++) av[i] = As[kk][tx + 16u * i];
            for (uint j = 0; j < TM; j++) bv[j] = Bs[kk][ty + 16u * j];
            for (uint i = 0; i < TM; i++) for (uint j = 0; j < TM; j++) acc[i][j] += av[i] * bv[j];
        }
        barrier();
    }
    for (uint j = 0; j < TM; j++) {
        uint n = nt + ty + 16u * j;
        if (n >= pc.N) continue;
        for (uint i = 0; i < TM; i++) {
            uint m = mt + tx + 16u * i;
            if (m >= pc.M) continue;
            d[pc.offd + int((pc.m0 + m) + n * pc.nb1 + i12 * pc.nb2 + i13 * pc.nb3)] = acc[i][j];
        }
    }
}
