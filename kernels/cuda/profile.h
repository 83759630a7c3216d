/* The CUDA backend's device profile (txl-train --bench --profile): a table of ops that runs each
 * op of the backend's own table and, per call, counts its work with the counting table of the
 * same activations (count_ops.h: launches, FLOPs, bytes from the shapes) and sorts it into a
 * family of kernels/profile.h; where a call's family is not the one of the call before, it
 * records a CUDA event on the compute stream and reads the host's clock. After a step the
 * events' intervals (each one run of a family's calls) are added to the families' device time,
 * the clock's to their host time. On the emulator the events tell the CPU's time, which means
 * nothing for a GPU; the counts hold. One profile per process; plain C. */
#ifndef TXL_KERNELS_CUDA_PROFILE_H
#define TXL_KERNELS_CUDA_PROFILE_H

#include <stddef.h>

#include "kernels/ops.h"
#include "kernels/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The profiling table over `inner` (a table of txl_ops_cuda, on the current device); tf32: its
 * fp32 GEMMs run in TF32 (for the counts). Makes max_marks events (>= 16; never in a step): a
 * step's marks beyond them are not taken, the rest of that step goes to the family of its last
 * mark, and the totals say so. A second create ends the job as an internal error. */
const TxlOps *txl_cuda_profile_create(const TxlOps *inner, int tf32, int max_marks);

/* Which parameter a GEMM multiplies by (fn, ctx) and where the gradient buffer lies (its zeroing
 * is the optimizer's): the model's layout, once it is made. */
void txl_cuda_profile_set_model(TxlGemmOfFn fn, void *ctx, const void *grad, size_t grad_bytes);

/* begin = 1 before a step's first op, 0 after its last: then the host waits for the step's last
 * event and adds the step to the totals. Calls outside a step are run, not profiled. */
void txl_cuda_profile_step(int begin);

/* The sums of the steps profiled so far. */
const TxlProfileTotals *txl_cuda_profile_totals(void);

/* Frees the events (nothing when there is no profile). */
void txl_cuda_profile_destroy(void);

#ifdef __cplusplus
}
#endif

#endif
