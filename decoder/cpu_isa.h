/* Internal: which instruction set the CPU kernels of the decoder use (quant.c, cpu_kernels.c), chosen once at run
 * time. The binary is built for baseline x86-64; the AVX2 and AVX-512 kernels are compiled with function-level
 * target attributes and only ever called after this check.
 *
 *   CQ_ISA_AVX512  AVX-512 F/BW/DQ/VL with VNNI (vpdpwssd), the OS saving the ZMM and mask state (XCR0), and a
 *                  probe that executes such instructions at first use without a SIGILL and with the right result
 *                  (a virtual machine may report features that it does not run)
 *   CQ_ISA_AVX2    AVX2, FMA and F16C, the OS saving the YMM state
 *   CQ_ISA_SCALAR  portable C (and what non-x86 builds run)
 *
 * CLAUSEQA_CPU_ISA=avx2 or =scalar in the environment caps the choice (for CI on AVX-512 machines, or to compare);
 * =avx512 or an unknown value leaves it to the CPU. A cap never raises the level above what was detected. */
#ifndef CQ_DECODER_CPU_ISA_H
#define CQ_DECODER_CPU_ISA_H

typedef enum { CQ_ISA_SCALAR = 0, CQ_ISA_AVX2 = 1, CQ_ISA_AVX512 = 2 } cq_isa;

/* The level the kernels use: the detected one, capped by CLAUSEQA_CPU_ISA, or what cq_isa_set chose. Inline (the
 * kernels ask per row): a plain read once the first call has detected it. */
extern int cq_isa_level_; /* -1 until detected */
cq_isa cq_isa_init_(void);
static inline cq_isa cq_isa_active(void) {
    const int l = __atomic_load_n(&cq_isa_level_, __ATOMIC_ACQUIRE);
    return l >= 0 ? (cq_isa)l : cq_isa_init_();
}
/* What the CPU runs (detection and probe, no cap). */
cq_isa cq_isa_detected(void);
/* Tests: use min(level, detected) from now on; returns the level in use before. Call while no kernel runs. */
cq_isa cq_isa_set(cq_isa level);
const char *cq_isa_name(cq_isa level); /* "avx512-vnni", "avx2", "scalar" */

#endif
