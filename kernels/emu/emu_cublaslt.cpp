/* The CPU emulator's cuBLASLt: the descriptors, the heuristic and cublasLtMatmul with the epilogues
 * DEFAULT, BIAS, RELU_BIAS, BGRADA and BGRADB, on the GEMM of cuBLAS (emu_gemm, emu_blas.h;
 * README.md here, "cuBLASLt"). */
#include "kernels/emu/emu_blas.h"

#include <stdlib.h>

/* ---- cuBLASLt ------------------------------------------------------------------------------ */
/* The descriptors are the real semi-opaque structs of cublasLt.h; the emulator keeps its own
 * state in them (memcpy in and out), tagged so that a descriptor that was never created, or
 * was destroyed, is refused. */
static const uint32_t LT_LAYOUT = 0x4c744c61u, LT_DESC = 0x4c744465u, LT_PREF = 0x4c745072u,
                      LT_ALGO = 0x4c74416cu;

struct LtLayout {
  uint32_t tag;
  int32_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct LtDesc {
  uint32_t tag;
  int32_t compute, scale, transa, transb;
  uint32_t epilogue;
  int32_t bias_type;
  const void *bias;
};
struct LtPref {
  uint32_t tag;
  uint64_t max_workspace;
};
static_assert(sizeof(LtLayout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout state too large");
static_assert(sizeof(LtDesc) <= sizeof(cublasLtMatmulDescOpaque_t), "descriptor state too large");
static_assert(sizeof(LtPref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "preference state too large");

template <class T, class O>
static bool lt_load(const O *opaque, uint32_t tag, T *out) {
  if (!opaque) return false;
  memcpy(out, opaque->data, sizeof *out);
  return out->tag == tag;
}
template <class T, class O>
static void lt_store(O *opaque, const T &state) {
  memset(opaque->data, 0, sizeof opaque->data);
  memcpy(opaque->data, &state, sizeof state);
}

struct cublasLtContext {
  cublasContext blas; /* the scratch copies of emu_gemm() */
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext{{CUBLAS_DEFAULT_MATH, CUBLAS_POINTER_MODE_HOST, NULL, {}, {}, {}}};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}
const char *cublasLtGetStatusString(cublasStatus_t status) { return cublasGetStatusString(status); }

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!matLayout) return CUBLAS_STATUS_INVALID_VALUE;
  *matLayout = new cublasLtMatrixLayoutOpaque_t;
  lt_store(*matLayout, LtLayout{LT_LAYOUT, (int32_t)type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  if (matLayout) {
    memset(matLayout->data, 0, sizeof matLayout->data);
    delete matLayout;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType) {
  if (!matmulDesc) return CUBLAS_STATUS_INVALID_VALUE;
  *matmulDesc = new cublasLtMatmulDescOpaque_t;
  lt_store(*matmulDesc, LtDesc{LT_DESC, (int32_t)computeType, (int32_t)scaleType, CUBLAS_OP_N, CUBLAS_OP_N,
                               CUBLASLT_EPILOGUE_DEFAULT, -1, NULL});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  if (matmulDesc) {
    memset(matmulDesc->data, 0, sizeof matmulDesc->data);
    delete matmulDesc;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes) {
  LtDesc d;
  if (!lt_load(matmulDesc, LT_DESC, &d) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  void *field;
  size_t size;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: field = &d.transa, size = sizeof d.transa; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: field = &d.transb, size = sizeof d.transb; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: field = &d.epilogue, size = sizeof d.epilogue; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: field = &d.bias, size = sizeof d.bias; break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: field = &d.bias_type, size = sizeof d.bias_type; break;
    default: return CUBLAS_STATUS_INVALID_VALUE; /* not in the emulated subset */
  }
  if (sizeInBytes != size) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(field, buf, size);
  lt_store(matmulDesc, d);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  lt_store(*pref, LtPref{LT_PREF, 0});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  if (pref) {
    memset(pref->data, 0, sizeof pref->data);
    delete pref;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes) {
  LtPref p;
  if (!lt_load(pref, LT_PREF, &p) || !buf) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || sizeInBytes != sizeof p.max_workspace)
    return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(&p.max_workspace, buf, sizeof p.max_workspace);
  lt_store(pref, p);
  return CUBLAS_STATUS_SUCCESS;
}

/* TXL_EMU_LT_EPILOGUES: on (the default) or off (every epilogue but DEFAULT unsupported), read
 * at every call so that a test can switch it with setenv. */
static bool lt_epilogues_on(void) {
  const char *env = getenv("TXL_EMU_LT_EPILOGUES");
  if (!env || !env[0] || strcmp(env, "on") == 0) return true;
  if (strcmp(env, "off") == 0) return false;
  emu_die("TXL_EMU_LT_EPILOGUES=%s: expected on or off", env);
}

/* One matmul as cublasLtMatmul runs it, once its descriptors have been checked. */
struct LtProblem {
  cublasOperation_t transa, transb;
  int m, n, k, lda, ldb, ldd;
  Operand operand;
  Store ab_store, d_store; /* the operands' and D's (and the bias's) storage */
  uint32_t epilogue;
  const void *bias;
};

static bool lt_fits_int(uint64_t x) { return x <= (uint64_t)INT32_MAX; }

/* The checks that cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul share, in this order:
 * invalid descriptors, operations, shapes (op(A) m x k, op(B) k x n, D m x n) and leading
 * dimensions (ld >= max(1, rows)) are CUBLAS_STATUS_INVALID_VALUE; sizes beyond int, a C layout
 * other than D's, type combinations outside those of cublasGemmEx (A, B fp32 with D fp32 and
 * compute 32F, 32F_PEDANTIC or 32F_FAST_TF32; A, B bf16 with D fp32 or bf16, and A, B fp16 with
 * D fp32 or fp16, with compute 32F or 32F_PEDANTIC; scale type fp32), an epilogue outside the five (or any but DEFAULT under
 * TXL_EMU_LT_EPILOGUES=off) and a bias type other than D's are CUBLAS_STATUS_NOT_SUPPORTED; a
 * NULL bias pointer with an epilogue that uses it is CUBLAS_STATUS_INVALID_VALUE. */
static cublasStatus_t lt_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                 cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                                 cublasLtMatrixLayout_t Ddesc, LtProblem *p) {
  LtDesc d;
  LtLayout a, b, c, o;
  if (!lt_load(desc, LT_DESC, &d) || !lt_load(Adesc, LT_LAYOUT, &a) || !lt_load(Bdesc, LT_LAYOUT, &b) ||
      !lt_load(Cdesc, LT_LAYOUT, &c) || !lt_load(Ddesc, LT_LAYOUT, &o))
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto op_ok = [](int32_t t) { return t == CUBLAS_OP_N || t == CUBLAS_OP_T || t == CUBLAS_OP_C; };
  if (!op_ok(d.transa) || !op_ok(d.transb)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = d.transa != CUBLAS_OP_N, tb = d.transb != CUBLAS_OP_N;
  const uint64_t m = o.rows, n = o.cols, k = ta ? a.rows : a.cols;
  if ((ta ? a.cols : a.rows) != m || (tb ? b.cols : b.rows) != k || (tb ? b.rows : b.cols) != n)
    return CUBLAS_STATUS_INVALID_VALUE;
  const auto ld_ok = [](const LtLayout &l) { return l.ld >= 1 && (uint64_t)l.ld >= l.rows; };
  if (!ld_ok(a) || !ld_ok(b) || !ld_ok(c) || !ld_ok(o)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!lt_fits_int(m) || !lt_fits_int(n) || !lt_fits_int(k) || !lt_fits_int((uint64_t)a.ld) ||
      !lt_fits_int((uint64_t)b.ld) || !lt_fits_int((uint64_t)o.ld))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (c.type != o.type || c.rows != o.rows || c.cols != o.cols || c.ld != o.ld)
    return CUBLAS_STATUS_NOT_SUPPORTED; /* only C == D is emulated */
  const bool compute_ok = d.compute == CUBLAS_COMPUTE_32F || d.compute == CUBLAS_COMPUTE_32F_PEDANTIC ||
                          d.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f32 = a.type == CUDA_R_32F && b.type == CUDA_R_32F && o.type == CUDA_R_32F;
  const bool bf16 = a.type == CUDA_R_16BF && b.type == CUDA_R_16BF &&
                    (o.type == CUDA_R_32F || o.type == CUDA_R_16BF) && d.compute != CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool f16 = a.type == CUDA_R_16F && b.type == CUDA_R_16F && (o.type == CUDA_R_32F || o.type == CUDA_R_16F) &&
                   d.compute != CUBLAS_COMPUTE_32F_FAST_TF32;
  if (!compute_ok || d.scale != CUDA_R_32F || (!f32 && !bf16 && !f16)) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint32_t e = d.epilogue;
  if (e != CUBLASLT_EPILOGUE_DEFAULT && e != CUBLASLT_EPILOGUE_BIAS && e != CUBLASLT_EPILOGUE_RELU_BIAS &&
      e != CUBLASLT_EPILOGUE_BGRADA && e != CUBLASLT_EPILOGUE_BGRADB)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (e != CUBLASLT_EPILOGUE_DEFAULT) {
    if (!lt_epilogues_on()) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (d.bias_type != -1 && d.bias_type != o.type) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!d.bias) return CUBLAS_STATUS_INVALID_VALUE;
  }
  p->transa = (cublasOperation_t)d.transa;
  p->transb = (cublasOperation_t)d.transb;
  p->m = (int)m, p->n = (int)n, p->k = (int)k;
  p->lda = (int)a.ld, p->ldb = (int)b.ld, p->ldd = (int)o.ld;
  p->operand = bf16  ? OPERAND_BF16
               : f16 ? OPERAND_F16
               : d.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? OPERAND_TF32
                                                          : OPERAND_F32;
  p->ab_store = emu_store_of((cudaDataType)a.type);
  p->d_store = emu_store_of((cudaDataType)o.type);
  p->epilogue = e;
  p->bias = d.bias;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc,
                                              cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc,
                                              cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference,
                                              int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount) {
  if (returnAlgoCount) *returnAlgoCount = 0;
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  LtPref pref;
  if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount ||
      !lt_load(preference, LT_PREF, &pref))
    return CUBLAS_STATUS_INVALID_VALUE;
  LtProblem p;
  const cublasStatus_t st = lt_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
  memset(&r, 0, sizeof r);
  r.algo.data[0] = LT_ALGO;
  r.workspaceSize = 0; /* the emulation needs none, within any MAX_WORKSPACE_BYTES */
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t lt_execute(cublasHandle_t blas, const LtProblem &p, const void *alpha, const void *A,
                                 const void *B, const void *beta, void *D);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!alpha || !beta || (algo && algo->data[0] != LT_ALGO)) return CUBLAS_STATUS_INVALID_VALUE;
  LtProblem p;
  const cublasStatus_t st = lt_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (C != D) return CUBLAS_STATUS_NOT_SUPPORTED; /* only C == D is emulated */
  /* on a capturing stream: recorded with the problem as the descriptors give it now, alpha and
   * beta read now (the host pointer mode, cuBLASLt's default: its pointer-mode attribute is not
   * emulated), a scratch of its own */
  auto call = [=](cublasHandle_t h, const void *al, const void *be) {
    return lt_execute(h, p, al, A, B, be, D);
  };
  cublasStatus_t rec;
  if (emu_blas_enqueue(stream, lightHandle->blas, alpha, beta, [] { return CUBLAS_STATUS_SUCCESS; }, call, &rec))
    return rec;
  return emu_counted(call(&lightHandle->blas, alpha, beta));
}

/* One checked matmul: D = alpha op(A) op(B) + beta D and the epilogue. */
static cublasStatus_t lt_execute(cublasHandle_t blas, const LtProblem &p, const void *alpha, const void *A,
                                 const void *B, const void *beta, void *D) {
  /* The bias gradient, from the operands as stored (fp32 as they are, not TF32-rounded; bf16,
   * fp16 widened), summed in fp32 in increasing k, not scaled by alpha; computed before D is
   * written and stored (overwriting) after it, in D's type. */
  std::vector<float> grad;
  if (p.epilogue == CUBLASLT_EPILOGUE_BGRADA || p.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    const bool on_a = p.epilogue == CUBLASLT_EPILOGUE_BGRADA;
    const void *X = on_a ? A : B;
    /* grad[r] = sum over q < k of op(A)[r, q] (BGRADA) or op(B)[q, r] (BGRADB), the element at
     * X[r ld + q] when it lies along X's column r (op(A) = A^T, op(B) = B), else X[q ld + r] */
    const bool trans = on_a ? p.transa != CUBLAS_OP_N : p.transb == CUBLAS_OP_N;
    const int ld = on_a ? p.lda : p.ldb;
    grad.assign((size_t)(on_a ? p.m : p.n), 0.0f);
    for (size_t r = 0; r < grad.size(); r++) {
      float s = 0.0f;
      for (int q = 0; q < p.k; q++) {
        const size_t at = trans ? r * (size_t)ld + (size_t)q : (size_t)q * ld + r;
        s += emu_load_elem(X, at, p.ab_store);
      }
      grad[r] = s;
    }
  }
  const BiasEpilogue bias{p.bias, p.d_store, p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS};
  const bool with_bias = p.epilogue == CUBLASLT_EPILOGUE_BIAS || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const cublasStatus_t g = emu_gemm(blas, p.transa, p.transb, p.m, p.n, p.k, (const float *)alpha, A,
                                    p.lda, B, p.ldb, (const float *)beta, D, p.ldd, p.operand, p.d_store,
                                    with_bias ? &bias : NULL);
  if (g != CUBLAS_STATUS_SUCCESS) return g;
  for (size_t r = 0; r < grad.size(); r++) emu_store_elem(const_cast<void *>(p.bias), r, p.d_store, grad[r]);
  return CUBLAS_STATUS_SUCCESS;
}
