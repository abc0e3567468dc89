/* A C99 program against the installed headers; its implementation comes from impl.cpp
 * (one C++17 file), and gcc links both with the flags pkg-config gives. */
#include <tessera/tessera.h>
#include <stdio.h>

int main(void) {
    struct tsr_init_params p = { 4 * 1024, NULL, false };
    struct tsr_context * ctx = tsr_init(p);
    struct tsr_tensor * t;
    if (!ctx) { fprintf(stderr, "%s\n", tsr_last_error()); return 1; }
    t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 1 << 20);  /* too big for the arena: NULL + message */
    if (t != NULL || tsr_last_error()[0] == '\0') return 1;
    t = tsr_new_tensor_1d(ctx, TSR_TYPE_F32, 4);
    tsr_set_f32_1d(t, 2, 1.5f);
    if (t == NULL || tsr_get_f32_1d(t, 2) != 1.5f) return 1;
    tsr_free(ctx);
    printf("C consumer: ok\n");
    return 0;
}
