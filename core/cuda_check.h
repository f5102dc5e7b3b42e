/* The one error check for CUDA runtime and cuBLAS calls (CUDA sources only; include after cuda_runtime.h and
 * cublas_v2.h). Each records the failing statement, file and line in the caller's `cq_err *err` and returns
 * CQ_ERR_DEVICE up the stack:
 *     CUDA_TRY(cudaMalloc(&p, bytes));   CUBLAS_TRY(cublasGemmEx(...));   kernel<<<g, b>>>(...); LAUNCH_TRY(); */
#ifndef CQ_CORE_CUDA_CHECK_H
#define CQ_CORE_CUDA_CHECK_H

#define CUDA_TRY(stmt)                                                                                         \
    do {                                                                                                       \
        cudaError_t e_ = (stmt);                                                                               \
        if (e_ != cudaSuccess)                                                                                 \
            return cq_err_set(err, CQ_ERR_DEVICE, "%s failed at %s:%d: %s", #stmt, __FILE__, __LINE__,         \
                              cudaGetErrorString(e_));                                                         \
    } while (0)

#define CUBLAS_TRY(stmt)                                                                                       \
    do {                                                                                                       \
        cublasStatus_t s_ = (stmt);                                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                       \
            return cq_err_set(err, CQ_ERR_DEVICE, "%s failed at %s:%d: cuBLAS status %d", #stmt, __FILE__,     \
                              __LINE__, (int)s_);                                                              \
    } while (0)

/* A kernel launch: checks the launch itself (bad configuration), not its completion. */
#define LAUNCH_TRY() CUDA_TRY(cudaGetLastError())

#endif
