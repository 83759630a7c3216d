/* The device profile of txl-train --bench --profile, in the terms every layer above the kernels
 * shares (no CUDA here): the families a step's time is split into, the regions the trainer marks
 * (the ops' mark), what a profile adds up per family, and the one question the kernels cannot
 * answer alone: which parameter a GEMM multiplies by (the model's layout answers it). The
 * profiling table itself is the CUDA backend's (kernels/cuda/profile.h), opened through
 * src/device/backend.h. */
#ifndef TXL_KERNELS_PROFILE_H
#define TXL_KERNELS_PROFILE_H

/* What the work queued after an ops->mark(region) is, until the next mark. */
enum {
  TXL_REGION_OPS = 0,       /* each op's own family (the default) */
  TXL_REGION_ALLREDUCE = 1, /* waiting for the gradient all-reduce (txl_reducer_finish) */
};

/* The families of the profile, in the order of its table. */
#define TXL_PROFILE_FAMILIES(X)                                                                    \
  X(ATTN_FWD, "attn_fwd", "the relative attention's forward (rel_attn_forward)")                   \
  X(ATTN_BWD, "attn_bwd", "its backward (rel_attn_backward)")                                      \
  X(GEMM_FFN, "gemm_ffn", "the FFN's GEMMs (w_ff1, w_ff2), forward and backward")                  \
  X(GEMM_PROJ, "gemm_proj", "the attention's projections (w_qkv, w_r, w_o)")                       \
  X(GEMM_IO, "gemm_io", "the input and output layers' GEMMs: embeddings, adaptive projections "   \
                        "and tails, the softmax's logits")                                         \
  X(EMBEDDING, "embedding", "row gathers, their scatter-add backward, the sinusoid positions")     \
  X(LAYERNORM, "layernorm", "layer norms (with their residual additions)")                         \
  X(ELEMENTWISE, "elementwise", "bias + ReLU + dropout of the FFN and its backward")               \
  X(DROPOUT, "dropout", "the other dropouts")                                                      \
  X(SOFTMAX_XENT, "softmax_xent", "softmax and cross-entropy, the loss sums")                      \
  X(GRAD_NORM, "grad_norm", "the gradient's norm and clipping record")                             \
  X(OPTIMIZER, "optimizer", "the update passes, the zeroing of the gradients, the weights' copy")  \
  X(ALLREDUCE, "allreduce", "waiting for the gradient all-reduce")                                 \
  X(UPLOAD, "upload", "host -> device copies: tokens, targets, position rows, constants")          \
  X(OTHER, "other", "biases, additions, copies, device -> host")

typedef enum {
#define TXL_PROFILE_ENUM(id, name, what) TXL_PROF_##id,
  TXL_PROFILE_FAMILIES(TXL_PROFILE_ENUM)
#undef TXL_PROFILE_ENUM
      TXL_PROF_FAMILIES
} TxlProfileFamily;

/* "attn_fwd", ...: one word each (the printout is parsed by tests); "?" for a number that is no
 * family. (The third column of the list says what each holds: for the reader, docs/gpu.md.) */
static inline const char *txl_profile_family_name(int family) {
  static const char *const names[TXL_PROF_FAMILIES] = {
#define TXL_PROFILE_NAME(id, name, what) name,
      TXL_PROFILE_FAMILIES(TXL_PROFILE_NAME)
#undef TXL_PROFILE_NAME
  };
  return family >= 0 && family < TXL_PROF_FAMILIES ? names[family] : "?";
}

/* Which parameter tensor a GEMM multiplies by or accumulates into, from its operands (A, B, C as
 * the op got them), and in *weight which operand that is (0 A, 1 B, 2 C, -1 none). */
typedef enum { TXL_GEMM_OF_IO, TXL_GEMM_OF_FFN, TXL_GEMM_OF_PROJ } TxlGemmOf;
typedef TxlGemmOf (*TxlGemmOfFn)(void *ctx, const void *A, const void *B, const void *C, int *weight);

/* One family's sums over the profiled steps. */
typedef struct {
  double device_s; /* device time: from the event before its first call to the event after its
                      last (a run of its calls), summed over every such run */
  double host_s;   /* host time over the same runs: issuing the calls (and waiting, where a call
                      waits) */
  double calls;    /* op calls (a family's op that counts no launch, e.g. a dropout of p = 0, is none) */
  double launches; /* kernel launches and library calls, counted from the shapes (kernels/cuda/cost.h) */
  double issued, syncs; /* the launches the host issued and its synchronisations with the device in
                           these calls, where the backend counts them (the CUDA emulator), else -1 */
  double tensor_flops, core_flops, bytes; /* counted work (kernels/cuda/cost.h) */
} TxlProfileSums;

typedef struct {
  int steps;     /* steps profiled */
  int truncated; /* steps whose marks outgrew the profile's events (their tail went to one family) */
  double step_device_s, step_host_s; /* the steps' whole time on each side */
  TxlProfileSums f[TXL_PROF_FAMILIES];
  /* Where the backend counts its launches (the emulator): the ops whose launches counted from the
   * shapes were not those the host issued, as "name counted/issued" per profiled step, ", "
   * between them; "" when every op's agree (or nothing counts them). */
  char mismatch[512];
} TxlProfileTotals;

#endif
