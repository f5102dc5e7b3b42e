#include "decoder/cpu_isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#define CQ_X86 1

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

/* What cpuid and XCR0 report. XCR0 bits: 1 SSE, 2 AVX (YMM upper halves), 5 opmask, 6 ZMM upper halves of 0-15,
 * 7 ZMM 16-31. */
static cq_isa reported_isa(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return CQ_ISA_SCALAR;
    const int osxsave = c >> 27 & 1, avx = c >> 28 & 1, fma = c >> 12 & 1, f16c = c >> 29 & 1;
    if (!osxsave || !avx) return CQ_ISA_SCALAR;
    const uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6) != 0x6) return CQ_ISA_SCALAR;
    if (__get_cpuid_max(0, NULL) < 7) return CQ_ISA_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = b >> 5 & 1;
    if (!avx2 || !fma || !f16c) return CQ_ISA_SCALAR;
    const int f = b >> 16 & 1, dq = b >> 17 & 1, bw = b >> 30 & 1, vl = b >> 31 & 1, vnni = c >> 11 & 1;
    if (f && dq && bw && vl && vnni && (xcr0 & 0xe6) == 0xe6) return CQ_ISA_AVX512;
    return CQ_ISA_AVX2;
}

/* The probe: the instructions the AVX-512 kernels rest on (512-bit integer and float arithmetic, a widening load,
 * vpdpwssd, a masked store, opmask compares), with a result checked against what they must give. */
static volatile int probe_offset = 16; /* read at run time, so that the compiler cannot fold the probe away */

__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"), noinline)) static int avx512_probe(void) {
    int8_t bytes[32];
    int16_t words[32];
    const int offset = probe_offset;
    for (int i = 0; i < 32; i++) bytes[i] = (int8_t)(i - offset), words[i] = (int16_t)(3 * i + 1);
    __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)bytes));
    __m512i acc = _mm512_dpwssd_epi32(_mm512_set1_epi32(5), w, _mm512_loadu_si512(words));
    __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f)); /* exact */
    int32_t out[16] = {0};
    _mm512_mask_storeu_epi32(out, (__mmask16)0x7fff, _mm512_cvtps_epi32(f));
    __mmask16 neg = _mm512_cmplt_epi32_mask(acc, _mm512_setzero_si512());
    int ok = out[15] == 0;
    for (int l = 0; l < 15; l++) { /* lane l: 5 + bytes[2l] words[2l] + bytes[2l+1] words[2l+1] */
        int32_t want = 5 + (2 * l - 16) * (6 * l + 1) + (2 * l - 15) * (6 * l + 4);
        ok &= out[l] == 2 * want + 1 && ((neg >> l) & 1) == (want < 0);
    }
    return ok;
}

static sigjmp_buf probe_jump;
static volatile sig_atomic_t probing;

static void on_sigill(int sig) {
    (void)sig;
    if (probing) siglongjmp(probe_jump, 1);
    signal(SIGILL, SIG_DFL); /* not the probe's: the default action, as if no handler had been there */
    raise(SIGILL);
}

/* Runs the probe with a SIGILL handler in place (the previous handler restored after). */
static int avx512_runs(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigill;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGILL, &sa, &old) != 0) return 0;
    volatile int ok = 0;
    probing = 1;
    if (sigsetjmp(probe_jump, 1) == 0) ok = avx512_probe();
    probing = 0;
    sigaction(SIGILL, &old, NULL);
    return ok;
}

static cq_isa detect(void) {
    cq_isa isa = reported_isa();
    if (isa == CQ_ISA_AVX512 && !avx512_runs()) isa = CQ_ISA_AVX2;
    return isa;
}
#else
static cq_isa detect(void) { return CQ_ISA_SCALAR; }
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cq_isa g_detected;
int cq_isa_level_ = -1;

static void init(void) {
    g_detected = detect();
    cq_isa active = g_detected;
    const char *env = getenv("CLAUSEQA_CPU_ISA");
    if (env && !strcmp(env, "scalar")) active = CQ_ISA_SCALAR;
    else if (env && !strcmp(env, "avx2") && active > CQ_ISA_AVX2) active = CQ_ISA_AVX2;
    __atomic_store_n(&cq_isa_level_, (int)active, __ATOMIC_RELEASE);
}

cq_isa cq_isa_init_(void) {
    pthread_once(&once, init);
    return (cq_isa)__atomic_load_n(&cq_isa_level_, __ATOMIC_ACQUIRE);
}

cq_isa cq_isa_detected(void) {
    pthread_once(&once, init);
    return g_detected;
}

cq_isa cq_isa_set(cq_isa level) {
    const cq_isa was = cq_isa_init_();
    __atomic_store_n(&cq_isa_level_, (int)(level < g_detected ? level : g_detected), __ATOMIC_RELEASE);
    return was;
}

const char *cq_isa_name(cq_isa level) {
    switch (level) {
    case CQ_ISA_AVX512: return "avx512-vnni";
    case CQ_ISA_AVX2: return "avx2";
    default: return "scalar";
    }
}
