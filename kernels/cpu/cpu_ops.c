/* The CPU backend's table of ops: txl_cpu_<name> for every op of kernels/ops.def. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ops.h"

static const TxlOps txl_cpu_ops = {
    .name = "cpu",
    .act = TXL_F32,
    .row_align = 1,
    .host_memory = 1,
#define TXL_OP(kind, ret, name, params) .name = txl_cpu_##name,
#include "kernels/ops.def"
#undef TXL_OP
};

const TxlOps *txl_ops_cpu(void) { return &txl_cpu_ops; }
