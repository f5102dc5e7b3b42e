/* The CPU kernels' instruction-set choice (decoder/cpu_isa.h): CLAUSEQA_CPU_ISA caps the detected level at first
 * use (this program sets it to "avx2" before anything reads it), cq_isa_set never goes above what the CPU runs, and
 * what was detected agrees with what the compiler's own CPU checks report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "decoder/cpu_isa.h"

static void test_env_caps_the_first_choice(void **state) {
    (void)state;
    const cq_isa detected = cq_isa_detected(), active = cq_isa_active();
    assert_true(active <= detected);
    assert_int_equal(active, detected < CQ_ISA_AVX2 ? detected : CQ_ISA_AVX2);
    fprintf(stderr, "  detected %s; CLAUSEQA_CPU_ISA=avx2 -> %s\n", cq_isa_name(detected), cq_isa_name(active));
}

static void test_set_never_above_detected(void **state) {
    (void)state;
    const cq_isa detected = cq_isa_detected(), before = cq_isa_active();
    assert_int_equal(cq_isa_set(CQ_ISA_SCALAR), before);
    assert_int_equal(cq_isa_active(), CQ_ISA_SCALAR);
    assert_int_equal(cq_isa_set(CQ_ISA_AVX512), CQ_ISA_SCALAR);
    assert_int_equal(cq_isa_active(), detected);
    cq_isa_set(before);
    assert_string_equal(cq_isa_name(CQ_ISA_AVX512), "avx512-vnni");
    assert_string_equal(cq_isa_name(CQ_ISA_AVX2), "avx2");
    assert_string_equal(cq_isa_name(CQ_ISA_SCALAR), "scalar");
}

/* The detection (cpuid, XCR0, and the probe for AVX-512) against GCC's cpuid-based checks: AVX-512 detected only
 * where all its parts are reported; AVX2 wherever AVX2, FMA and F16C are, unless the OS does not save the YMM state
 * (where __builtin_cpu_supports does not look, so only one direction holds for that level). */
static void test_detection_agrees_with_cpuid(void **state) {
    (void)state;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                       __builtin_cpu_supports("avx512vnni");
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (cq_isa_detected() >= CQ_ISA_AVX512) assert_true(avx512);
    if (cq_isa_detected() >= CQ_ISA_AVX2) assert_true(avx2);
#else
    assert_int_equal(cq_isa_detected(), CQ_ISA_SCALAR);
#endif
}

int main(void) {
    setenv("CLAUSEQA_CPU_ISA", "avx2", 1); /* before the first use, which reads it */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_caps_the_first_choice),
        cmocka_unit_test(test_set_never_above_detected),
        cmocka_unit_test(test_detection_agrees_with_cpuid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
