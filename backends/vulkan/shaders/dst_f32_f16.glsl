// The destination binding (3) of shaders that write F32 or F16 (DST_F16 define), and its
// store: d_store(i, v) converts v to the destination's type.
#if DST_F16
layout(binding = 3) buffer D { float16_t d[]; };
void d_store(int i, float v) { d[i] = float16_t(v); }
#else
layout(binding = 3) buffer D { float d[]; };
void d_store(int i, float v) { d[i] = v; }
#endif
