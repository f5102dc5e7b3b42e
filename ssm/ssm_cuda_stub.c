/* Without CUDA the CUDA backend exists only to say so. */
#ifndef CLAUSEQA_HAVE_CUDA
#include "ssm/ssm_internal.h"

cq_status cq_ssm_cuda_new(const cq_ssm_model *m, cq_ssm_cuda **out, cq_err *err) {
    (void)m;
    *out = NULL;
    return cq_err_set(err, CQ_ERR_UNSUPPORTED, "this build of clauseqa has no CUDA");
}
void cq_ssm_cuda_free(cq_ssm_cuda *c) { (void)c; }
cq_status cq_ssm_cuda_forward(cq_ssm_cuda *c, const cq_ssm_block *b, cq_err *err) {
    (void)c;
    (void)b;
    return cq_err_set(err, CQ_ERR_UNSUPPORTED, "this build of clauseqa has no CUDA");
}
cq_status cq_ssm_cuda_bench_scan(cq_ssm_cuda *c, size_t T, double *scan_ms, double *scan_gbps, double *copy_gbps,
                                 cq_err *err) {
    (void)c, (void)T, (void)scan_ms, (void)scan_gbps, (void)copy_gbps;
    return cq_err_set(err, CQ_ERR_UNSUPPORTED, "this build of clauseqa has no CUDA");
}
size_t cq_ssm_cuda_block_tokens(const cq_ssm_cuda *c) {
    (void)c;
    return 0;
}
#else
typedef int cq_ssm_cuda_stub_unused; /* ISO C wants a translation unit to declare something */
#endif
