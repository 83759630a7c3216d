/* The GEMMs with a fused epilogue (kernels/ops.def: gemm_bias, gemm_wgrad_bias) through cuBLASLt.
 *
 *   gemm_bias        C = op(A) op(B) + bias [, ReLU]: epilogue BIAS / RELU_BIAS; replaces the
 *                    pass that wrote the bias into C before a gemm with beta = 1 (and the C it
 *                    read back), or the bias + ReLU pass after the gemm.
 *   gemm_wgrad_bias  dw += op(A) op(B), db += the column sums of dy: epilogue BGRADA / BGRADB
 *                    (the bias gradient of cuBLASLt's A or B, summed over k); replaces
 *                    bias_backward's pass over dy [K, n] by an n-element addition.
 *
 * The row-major to column-major mapping is gemm.cu's: the row-major C [M, N] is the column-major
 * D = C^T [N, M] = op(B)^T op(A)^T, so cuBLASLt's A is our B and its B our A, m = N, n = M. Hence
 * the bias of length N (the row-major columns) is the bias of D's rows, as BIAS wants; dy = our
 * B is cuBLASLt's A (BGRADA, length m = N) and dy = our A is its B (BGRADB, length n = M).
 *
 * Types, as the cuBLASLt header states them: the bias and the bias gradient have D's type. So the
 * bf16 table passes the bias in bf16 (the model's compute copy of the fp32 master: the same
 * bf16 value the unfused pass wrote into C), the fp16 table in fp16 likewise, and the bias
 * gradient of an fp32 dw is fp32.
 * Arithmetic: the fp32 table's compute type is gemm.cu's (exact fp32 or TF32), the bf16 and fp16
 * tables' fp32 on exact bf16 / fp16 products, as the plain gemm.
 *
 * Which combinations a GPU's cuBLASLt takes is its heuristic's answer
 * (cublasLtMatmulAlgoGetHeuristic), asked once per shape and kept with the shape's descriptors (Entry
below: a call of a known shape makes no descriptor and asks no heuristic). Where it has no
 * algorithm the op runs the unfused passes on the device instead (the CPU's order: see
 * kernels/cpu/gemm_epilogue.c), so a GPU or toolkit that lacks one epilogue loses only the fusion.
 * txl_cuda_gemm_epilogue_counts tells how many calls took which path (the tests check both; the
 * emulator's TXL_EMU_LT_EPILOGUES=off refuses every epilogue).
 *
 * Memory: the bias-gradient vector (bias_n floats) and cuBLASLt's workspace (TXL_CUDA_GEMM_WORKSPACE_BYTES
 * bytes) are reserved by the op reserve (txl_cuda_gemm_lt_reserve); before that (a run that only
 * evaluates) the workspace is 0 bytes, which every cuBLASLt algorithm without split-K accepts.
 * Determinism: for one toolkit, architecture and SM count, cuBLASLt's heuristic answers the same
 * and the chosen algorithm gives the same bits run to run (cuBLAS's reproducibility statement);
 * the cache only keeps its answer. */
#include <string.h>

#include "kernels/common/workspace.h"
#include "kernels/cuda/act.h"

#define TXL_LT_CACHE 1024                   /* shapes whose heuristic answer is kept (a power of 2) */

static cublasLtHandle_t g_lt = NULL;
static TxlCudaScratch g_bgrad = {NULL, 0, "bias-gradient vector of the fused GEMMs"};
static TxlCudaScratch g_work = {NULL, 0, "cuBLASLt workspace"};
static long g_counts[2] = {0, 0}; /* calls fused, calls unfused */

void txl_cuda_gemm_lt_reserve(int bias_n) {
  txl_cuda_scratch_reserve(&g_bgrad, (size_t)(bias_n > 0 ? bias_n : 1) * sizeof(float));
  txl_cuda_scratch_reserve(&g_work, TXL_CUDA_GEMM_WORKSPACE_BYTES);
}

static void cache_release(void);

void txl_cuda_gemm_lt_release(void) {
  cache_release();
  txl_cuda_scratch_release(&g_bgrad);
  txl_cuda_scratch_release(&g_work);
  if (g_lt) {
    CUBLAS_CHECK(cublasLtDestroy(g_lt));
    g_lt = NULL;
  }
}

extern "C" void txl_cuda_gemm_epilogue_counts(long *fused, long *unfused) {
  *fused = g_counts[0];
  *unfused = g_counts[1];
}

/* ---- the heuristic's answers, kept per shape ------------------------------------------------ */

typedef struct {
  int v[12]; /* trans_a, trans_b, M, N, K, lda, ldb, ldc, ab, c, epilogue, compute */
} Key;

/* A shape's descriptors (the operation and the three layouts) are made once with its entry and
 * kept until txl_cuda_gemm_lt_release: a call of a known shape sets only the bias pointer, the
 * one attribute that changes from call to call. */
typedef struct {
  Key key;
  int state; /* 0 empty, 1 an algorithm, 2 none (run unfused) */
  cublasLtMatmulAlgo_t algo = {};
  cublasLtMatmulDesc_t desc = NULL; /* state 1: kept */
  cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
} Entry;

static Entry g_cache[TXL_LT_CACHE];

static void destroy_descriptors(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                cublasLtMatrixLayout_t lc) {
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
  CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
  CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
}

static uint32_t key_hash(const Key *k) {
  uint32_t h = 2166136261u; /* FNV-1a over the ints */
  for (int i = 0; i < 12; i++) {
    h ^= (uint32_t)k->v[i];
    h *= 16777619u;
  }
  return h;
}

/* The slot of k, or of the empty one where it goes; NULL when the table is full (then nothing is
 * kept and the heuristic is asked again on every call of that shape: slower, not different). */
static Entry *lookup(const Key *k) {
  uint32_t i = key_hash(k) & (TXL_LT_CACHE - 1);
  for (int probe = 0; probe < TXL_LT_CACHE; probe++, i = (i + 1) & (TXL_LT_CACHE - 1)) {
    Entry *e = &g_cache[i];
    if (e->state == 0 || memcmp(e->key.v, k->v, sizeof k->v) == 0) return e;
  }
  return NULL;
}

/* Every entry emptied, its descriptors destroyed. */
static void cache_release(void) {
  for (int i = 0; i < TXL_LT_CACHE; i++) {
    Entry *e = &g_cache[i];
    if (e->desc) destroy_descriptors(e->desc, e->la, e->lb, e->lc);
    *e = Entry();
  }
}

/* ---- one cuBLASLt matmul -------------------------------------------------------------------- */

typedef struct {
  int trans_a, trans_b, M, N, K;
  const void *A;
  int lda;
  const void *B;
  int ldb;
  void *C;
  int ldc;
  float beta;
  TxlDtype ab, c;                /* operand and C types */
  cublasLtEpilogue_t epilogue;
  const void *bias;              /* BIAS / RELU_BIAS: read; BGRADA / BGRADB: written */
} LtGemm;

/* Runs g as one cuBLASLt matmul when the library has an algorithm for it and returns 1; returns 0
 * (nothing done) when it has none. */
static int lt_matmul(const LtGemm *g) {
  if (!g_lt) CUBLAS_CHECK(cublasLtCreate(&g_lt));
  const cublasComputeType_t compute =
      g->ab != TXL_F32 || !txl_cuda_gemm_tf32() ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
  /* Our B is cuBLASLt's A (m = N rows of op(A') ), our A its B: see the top of the file. */
  const cublasOperation_t op_a = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t ta = (int32_t)op_a, tb = (int32_t)op_b;
  const uint32_t epi = (uint32_t)g->epilogue;
  const int32_t bias_type = (int32_t)txl_cuda_data_type(g->c);
  const Key key = {{g->trans_a, g->trans_b, g->M, g->N, g->K, g->lda, g->ldb, g->ldc, (int)g->ab, (int)g->c,
                    (int)g->epilogue, (int)compute}};
  Entry *e = lookup(&key);
  if (e && e->state == 2) return 0;
  const uint64_t work_bytes = g_work.bytes;
  const float alpha = 1.0f;
  if (e && e->state == 1) { /* a known shape: its descriptors, the bias of this call */
    if (g->epilogue != CUBLASLT_EPILOGUE_DEFAULT)
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias,
                                                  sizeof g->bias));
    CUBLAS_CHECK(cublasLtMatmul(g_lt, e->desc, &alpha, g->B, e->la, g->A, e->lb, &g->beta, g->C, e->lc, g->C, e->lc,
                                &e->algo, g_work.p, work_bytes, txl_cuda_stream() /* the compute stream */));
    g_counts[0]++;
    return 1;
  }

  cublasLtMatmulDesc_t desc;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (g->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                                sizeof bias_type));
  }
  /* The stored matrices, column-major: cuBLASLt's A is op_a ? [K, N] : [N, K] with ld ldb, ... */
  cublasLtMatrixLayout_t la, lb, lc;
  const cudaDataType at = txl_cuda_data_type(g->ab), ct = txl_cuda_data_type(g->c);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, at, g->trans_b ? g->K : g->N, g->trans_b ? g->N : g->K, g->ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, at, g->trans_a ? g->M : g->K, g->trans_a ? g->K : g->M, g->lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, ct, g->N, g->M, g->ldc));

  int ok = 0;
  cublasLtMatmulAlgo_t algo = {};
  {
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &work_bytes,
                                                      sizeof work_bytes));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g_lt, desc, la, lb, lc, lc, pref, 1, &res, &found);
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    /* NOT_SUPPORTED (or no result) is the library's "no algorithm for this"; anything else is an
     * error of ours. */
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) CUBLAS_CHECK(st);
    ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (ok) algo = res.algo;
    if (e) {
      e->key = key;
      e->state = ok ? 1 : 2;
      if (ok) e->algo = algo;
    }
  }
  if (ok)
    CUBLAS_CHECK(cublasLtMatmul(g_lt, desc, &alpha, g->B, la, g->A, lb, &g->beta, g->C, lc, g->C, lc, &algo,
                                g_work.p, work_bytes, txl_cuda_stream() /* the compute stream, as every op */));
  if (ok && e) { /* kept with the shape's entry */
    e->desc = desc;
    e->la = la;
    e->lb = lb;
    e->lc = lc;
  } else {
    destroy_descriptors(desc, la, lb, lc);
  }
  g_counts[ok ? 0 : 1]++;
  return ok;
}

/* ---- the unfused passes --------------------------------------------------------------------- */

/* relu 0: C[r, j] = bias[j] (before a gemm with beta = 1); relu 1: C[r, j] = max(C[r, j] +
 * bias[j], 0) (after a gemm with beta = 0), in fp32, stored once.   C [M, N] (ldc), bias [N] */
template <typename T>
static __global__ void bias_pass_kernel(T *C, const T *bias, int M, int N, int ldc, int relu) {
  const int64_t total = (int64_t)M * N;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / N, j = e % N;
    T *c = C + i * ldc + j;
    if (relu) {
      const float v = txl_ld(c) + txl_ld(&bias[j]);
      txl_st(c, v > 0.0f ? v : 0.0f);
    } else {
      txl_st(c, txl_ld(&bias[j]));
    }
  }
}

template <typename T>
static void bias_pass(T *C, const T *bias, int M, int N, int ldc, int relu) {
  TXL_LAUNCH(bias_pass_kernel<T>, txl_cuda_blocks((int64_t)M * N, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(
      C, bias, M, N, ldc, relu);
  CUDA_LAUNCH_CHECK();
}

/* db[j] += v[j]   [n] */
static __global__ void add_vector_kernel(float *db, const float *v, int n) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < n) db[j] += v[j];
}

/* ---- the ops -------------------------------------------------------------------------------- */

template <TxlDtype AT>
void txl_act_gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
                       const void *bias, int relu, void *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K > 0) {
    const LtGemm g = {trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, 0.0f, AT, AT,
                      relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS, bias};
    if (lt_matmul(&g)) return;
  }
  using T = typename TxlAct<AT>::T;
  T *c = static_cast<T *>(C);
  const T *b = static_cast<const T *>(bias);
  const TxlOps *o = txl_ops_cuda(AT); /* the unfused passes: this table's own gemm */
  if (relu) {
    o->gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, AT);
    bias_pass(c, b, M, N, ldc, 1);
  } else {
    bias_pass(c, b, M, N, ldc, 0);
    o->gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc, AT);
  }
}

TXL_CUDA_ACT_ENTRIES(gemm_bias)

template <TxlDtype AT>
void txl_act_gemm_wgrad_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                             int ldb, float *dw, int lddw, float *db, int dy_is_a) {
  if (dy_is_a ? !trans_a || lda < M : trans_b || ldb < N)
    txl_fatal("internal: gemm_wgrad_bias: dy as %s needs %s", dy_is_a ? "A" : "B",
              dy_is_a ? "trans_a and lda >= M" : "no trans_b and ldb >= N");
  if (M <= 0 || N <= 0 || K <= 0) return; /* dw += 0, db += 0 */
  const int n = dy_is_a ? M : N;
  float *v = static_cast<float *>(txl_cuda_scratch(&g_bgrad, (size_t)n * sizeof(float)));
  const LtGemm g = {trans_a, trans_b, M, N, K, A, lda, B, ldb, dw, lddw, 1.0f, AT, TXL_F32,
                    dy_is_a ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA, v};
  if (lt_matmul(&g)) {
    TXL_LAUNCH(add_vector_kernel, txl_cuda_blocks(n, TXL_CUDA_THREADS), TXL_CUDA_THREADS, 0)(db, v, n);
    CUDA_LAUNCH_CHECK();
    return;
  }
  const TxlOps *o = txl_ops_cuda(AT); /* the unfused passes: this table's own ops */
  o->bias_backward(db, dy_is_a ? A : B, K, n, dy_is_a ? lda : ldb);
  o->gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, dw, lddw, TXL_F32);
}

TXL_CUDA_ACT_ENTRIES(gemm_wgrad_bias)
