/*
 * isa.inl - what the CPU can run (CPUID on x86-64, always NEON on aarch64) and which
 * kernel path is in use (best available, TSR_CPU_ISA, or tsr_cpu_set_isa).
 */
#if defined(TSR_CPU_X86) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
namespace {
namespace tcpu {

struct cpu_features {
    bool avx2 = false, fma = false, f16c = false;
    bool avx_vnni = false;          /* AVX-VNNI: vpdpbusd on ymm (Alder Lake and later; Zen 5) */
    bool avx512 = false;            /* F + BW + VL + DQ with OS support */
    bool avx512_bf16 = false, avx512_vnni = false;
    bool avx512_gfni = false;       /* GFNI on zmm: gf2p8affineqb's per-byte bit moves */
    bool avx512_vbmi = false;       /* AVX512_VBMI (vpmultishiftqb's bit fields, vpermb) and BMI2 */
    bool amx_int8 = false;          /* AMX-TILE + AMX-INT8 with the tile state enabled by the OS
                                     * (XCR0); a process must still ask for the tile data (amx_ready) */
    bool amx_bf16 = false;          /* and AMX-BF16 */
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
        f.avx512_vbmi = f.avx512 && ((c >> 1) & 1) && ((b >> 8) & 1);
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        __cpuid_count(7, 1, a1, b1, c1, d1);
        f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1);
        f.avx_vnni = f.avx2 && ((a1 >> 4) & 1);
        const bool os_amx = (xcr0 & 0x60000) == 0x60000;  /* XTILECFG and XTILEDATA */
        f.amx_int8 = f.avx512_vnni && os_amx && ((d >> 24) & 1) && ((d >> 25) & 1);
        f.amx_bf16 = f.amx_int8 && ((d >> 22) & 1);
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

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* true once this process may use AMX tile data: Linux keeps the 8 KiB tile state off for a
 * process until it asks (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), and a
 * tile instruction before that faults. Asked once, only when the AMX path is first
 * considered (TSR_CPU_ISA naming another path never asks). Other systems: no AMX path. */
static bool amx_ready() {
#if defined(TSR_CPU_X86) && defined(__linux__) && defined(SYS_arch_prctl)
    static const bool ready = features().amx_int8 && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                                                             18 /* XFEATURE_XTILEDATA */) == 0;
    return ready;
#else
    return false;
#endif
}
#endif

static bool isa_supported(enum tsr_cpu_isa isa) {
    const cpu_features & f = features();
    switch (isa) {
        case TSR_CPU_ISA_SCALAR: return true;
#if defined(TSR_CPU_HAVE_X86_KERNELS)
        case TSR_CPU_ISA_AVX2:   return f.avx2;
        case TSR_CPU_ISA_AVX512: return f.avx512;
        case TSR_CPU_ISA_AMX:    return f.avx512 && f.avx512_vnni && amx_ready();
#endif
#if defined(TSR_CPU_ARM64)
        case TSR_CPU_ISA_NEON:   return f.neon;
#endif
        default: return false;
    }
}

static enum tsr_cpu_isa isa_best() {
    if (isa_supported(TSR_CPU_ISA_AMX)) return TSR_CPU_ISA_AMX;
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
        case TSR_CPU_ISA_AMX:    return "amx";
    }
    return "unknown";
}

static enum tsr_cpu_isa isa_initial() {
    const char * env = std::getenv("TSR_CPU_ISA");
    if (!env || !*env) return isa_best();
    for (int i = 0; i <= (int)TSR_CPU_ISA_AMX; ++i) {
        if (std::strcmp(env, isa_name((enum tsr_cpu_isa)i)) == 0) {
            if (isa_supported((enum tsr_cpu_isa)i)) return (enum tsr_cpu_isa)i;
            std::fprintf(stderr, "tessera: TSR_CPU_ISA=%s is not supported by this CPU; using %s\n", env, isa_name(isa_best()));
            return isa_best();
        }
    }
    std::fprintf(stderr, "tessera: unknown TSR_CPU_ISA=%s (scalar|avx2|avx512|amx|neon); using %s\n", env, isa_name(isa_best()));
    return isa_best();
}

static std::atomic<int> & isa_current() {
    static std::atomic<int> cur{(int)isa_initial()};
    return cur;
}

#if defined(TSR_CPU_HAVE_X86_KERNELS)
/* The vector ISA of the path in use: the AMX path runs the AVX-512 path's kernels for
 * everything but its int8 GEMMs. */
static enum tsr_cpu_isa isa_vector() {
    const int i = isa_current().load(std::memory_order_relaxed);
    return i == TSR_CPU_ISA_AMX ? TSR_CPU_ISA_AVX512 : (enum tsr_cpu_isa)i;
}
#endif

} // namespace tcpu
} // namespace
