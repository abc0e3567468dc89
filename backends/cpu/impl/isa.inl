/*
 * isa.inl - what the CPU can run (CPUID on x86-64, always NEON on aarch64) and which
 * kernel path is in use (best available, TSR_CPU_ISA, or tsr_cpu_set_isa).
 */
namespace {
namespace tcpu {

struct cpu_features {
    bool avx2 = false, fma = false, f16c = false;
    bool avx512 = false;            /* F + BW + VL + DQ with OS support */
    bool avx512_bf16 = false, avx512_vnni = false;
    bool avx512_gfni = false;       /* GFNI on zmm: gf2p8affineqb's per-byte bit moves */
    bool neon = false;
};

static cpu_features detect_features() {
    cpu_features f;
#if defined(TSR_CPU_X86)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = (c >> 27) & 1;
    f.fma = (c >> 12) & 1;
    f.f16c = (c >> 29) & 1;
    const bool avx = (c >> 28) & 1;
    uint64_t xcr0 = 0;
    if (osxsave) {
        unsigned lo = 0, hi = 0;
        __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = ((uint64_t)hi << 32) | lo;
    }
    const bool os_avx = (xcr0 & 0x6) == 0x6;
    const bool os_avx512 = (xcr0 & 0xE6) == 0xE6;
    unsigned maxleaf = __get_cpuid_max(0, nullptr);
    if (maxleaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f.avx2 = avx && os_avx && ((b >> 5) & 1) && f.fma && f.f16c;
        const bool f512 = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
        f.avx512 = f.avx2 && os_avx512 && f512 && dq && bw && vl;
        f.avx512_vnni = f.avx512 && ((c >> 11) & 1);
        f.avx512_gfni = f.avx512 && ((c >> 8) & 1);
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1);
    }
#elif defined(TSR_CPU_ARM64)
    f.neon = true;
#endif
    return f;
}

static const cpu_features & features() {
    static const cpu_features f = detect_features();
    return f;
}

static bool isa_supported(enum tsr_cpu_isa isa) {
    const cpu_features & f = features();
    switch (isa) {
        case TSR_CPU_ISA_SCALAR: return true;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
        case TSR_CPU_ISA_AVX2:   return f.avx2;
        case TSR_CPU_ISA_AVX512: return f.avx512;
#endif
#if defined(TSR_CPU_ARM64)
        case TSR_CPU_ISA_NEON:   return f.neon;
#endif
        default: return false;
    }
}

static enum tsr_cpu_isa isa_best() {
    if (isa_supported(TSR_CPU_ISA_AVX512)) return TSR_CPU_ISA_AVX512;
    if (isa_supported(TSR_CPU_ISA_AVX2)) return TSR_CPU_ISA_AVX2;
    if (isa_supported(TSR_CPU_ISA_NEON)) return TSR_CPU_ISA_NEON;
    return TSR_CPU_ISA_SCALAR;
}

static const char * isa_name(enum tsr_cpu_isa isa) {
    switch (isa) {
        case TSR_CPU_ISA_SCALAR: return "scalar";
        case TSR_CPU_ISA_AVX2:   return "avx2";
        case TSR_CPU_ISA_AVX512: return "avx512";
        case TSR_CPU_ISA_NEON:   return "neon";
    }
    return "unknown";
}

static enum tsr_cpu_isa isa_initial() {
    enum tsr_cpu_isa best = isa_best();
    const char * env = std::getenv("TSR_CPU_ISA");
    if (!env || !*env) return best;
    for (int i = 0; i <= (int)TSR_CPU_ISA_NEON; ++i) {
        if (std::strcmp(env, isa_name((enum tsr_cpu_isa)i)) == 0) {
            if (isa_supported((enum tsr_cpu_isa)i)) return (enum tsr_cpu_isa)i;
            std::fprintf(stderr, "tessera: TSR_CPU_ISA=%s is not supported by this CPU; using %s\n", env, isa_name(best));
            return best;
        }
    }
    std::fprintf(stderr, "tessera: unknown TSR_CPU_ISA=%s (scalar|avx2|avx512|neon); using %s\n", env, isa_name(best));
    return best;
}

static std::atomic<int> & isa_current() {
    static std::atomic<int> cur{(int)isa_initial()};
    return cur;
}

} // namespace tcpu
} // namespace
