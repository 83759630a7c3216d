/* The counting backend (count_ops.h). Each op below has its TxlOps member's signature and adds
 * what the CUDA backend's kernel of the same name executes with these arguments: bytes are each
 * operand read once and each result written once, at its storage size (A: the activation type,
 * 4: fp32); FLOPs of the element-wise kernels are the per-element count stated beside each op
 * (integer work such as the Philox keys of dropout, and index arithmetic, is not counted).
 * The attention's count is the kernels' own (txl_cuda_rel_attn_cost, kernels/cuda/rel_attn.cu). */
#define _DEFAULT_SOURCE /* MAP_NORESERVE, MAP_ANONYMOUS */
#include "kernels/cuda/count_ops.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/cuda/cuda_ops.h"
#include "src/base/error.h"

static const char *const k_family_names[TXL_COUNT_FAMILIES] = {
    "gemm_ffn",  "gemm_attn_proj", "gemm_io",      "attention", "layernorm", "ffn_elementwise",
    "embedding", "softmax_xent",   "dropout",      "optimizer", "other",
};

const char *txl_count_family_name(int family) {
  if (family < 0 || family >= TXL_COUNT_FAMILIES) txl_fatal("internal: count family %d", family);
  return k_family_names[family];
}

/* ---- the counting state -------------------------------------------------------------------- */

static struct {
  TxlDtype act;
  int tf32;
  TxlCudaCost cost[TXL_COUNT_FAMILIES];
  TxlGemmOfFn gemm_family;
  int call_family; /* txl_count_call_family */
  void *gemm_ctx;
  TxlCountAlign align;
  const char *grad; /* txl_count_set_gradients */
  size_t grad_bytes;
  /* the live mappings, for munmap's length */
  void **maps;
  size_t *map_bytes;
  int n_maps, cap_maps;
} g;

void txl_count_reset(void) {
  memset(g.cost, 0, sizeof g.cost);
  memset(&g.align, 0, sizeof g.align);
}
const TxlCountAlign *txl_count_gemm_align(void) { return &g.align; }
const TxlCudaCost *txl_count_costs(void) { return g.cost; }

void txl_count_call_begin(void) { g.call_family = -1; }
int txl_count_call_family(void) { return g.call_family; }

void txl_count_set_gemm_family(TxlGemmOfFn fn, void *ctx) {
  g.gemm_family = fn;
  g.gemm_ctx = ctx;
}

void txl_count_set_gradients(const void *grad, size_t bytes) {
  g.grad = grad;
  g.grad_bytes = grad ? bytes : 0;
}

/* The call counts into family f (the first family it counts into is the call's). */
static void touch(TxlCountFamily f) {
  if (g.call_family < 0) g.call_family = (int)f;
}

/* `launches` kernels of family f: FLOPs on the CUDA cores, bytes moved. */
static void add_n(TxlCountFamily f, double core_flops, double bytes, double launches) {
  touch(f);
  g.cost[f].core_flops += core_flops;
  g.cost[f].bytes += bytes;
  g.cost[f].launches += launches;
}
/* One launch of family f. */
static void add(TxlCountFamily f, double core_flops, double bytes) { add_n(f, core_flops, bytes, 1.0); }
/* A copy or memset of family f (cudaMemcpyAsync, cudaMemsetAsync): bytes, no kernel launch (the
 * emulator's count of launches has none either). */
static void move(TxlCountFamily f, double bytes) { add_n(f, 0.0, bytes, 0.0); }

static double act_bytes(void) { return (double)txl_dtype_size(g.act); }

/* ---- memory -------------------------------------------------------------------------------- */

/* Address space only: never touched, so no page is ever made. */
static void *count_alloc(size_t bytes, const char *what) {
  const size_t len = bytes ? bytes : 1;
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) txl_fatal("count: no address space for %s (%zu bytes)", what, bytes);
  if (g.n_maps == g.cap_maps) {
    g.cap_maps = g.cap_maps ? 2 * g.cap_maps : 256;
    g.maps = realloc(g.maps, (size_t)g.cap_maps * sizeof *g.maps);
    g.map_bytes = realloc(g.map_bytes, (size_t)g.cap_maps * sizeof *g.map_bytes);
    ALLOC_CHECK(g.maps);
    ALLOC_CHECK(g.map_bytes);
  }
  g.maps[g.n_maps] = p;
  g.map_bytes[g.n_maps++] = len;
  return p;
}

static void count_free(void *p) {
  if (!p) return;
  for (int i = 0; i < g.n_maps; i++)
    if (g.maps[i] == p) {
      munmap(p, g.map_bytes[i]);
      g.maps[i] = g.maps[--g.n_maps];
      g.map_bytes[i] = g.map_bytes[g.n_maps];
      return;
    }
  txl_fatal("internal: count: free of %p, which alloc did not give", p);
}

/* read + write */
static void count_copy(void *dst, const void *src, size_t bytes) {
  (void)dst, (void)src;
  move(TXL_COUNT_OTHER, 2.0 * (double)bytes);
}
/* host <-> device: the bytes cross once (PCIe, counted as device-memory bytes) */
static void count_to_device(void *dst, const void *host_src, size_t bytes) {
  (void)dst, (void)host_src;
  move(TXL_COUNT_OTHER, (double)bytes);
}
static void count_upload(void *dst, const void *host_src, size_t bytes) {
  (void)dst, (void)host_src;
  move(TXL_COUNT_OTHER, (double)bytes);
}
/* page-locked host memory of the CUDA backend: nothing to count */
static void count_upload_reserve(size_t bytes) { (void)bytes; }
static void count_to_host(void *host_dst, const void *src, size_t bytes) {
  (void)src;
  memset(host_dst, 0, bytes);
  move(TXL_COUNT_OTHER, (double)bytes);
}
/* the gradients' zeroing belongs to the optimizer chain, any other zeroing to "other" */
static void count_zero(void *p, size_t bytes) {
  const char *c = p;
  const int grad = g.grad && c >= g.grad && c < g.grad + g.grad_bytes;
  move(grad ? TXL_COUNT_OPTIMIZER : TXL_COUNT_OTHER, (double)bytes);
}
/* scratch of the CUDA backend: nothing to count */
static void count_reserve(int64_t rows, int bias_n, int norm_d) { (void)rows, (void)bias_n, (void)norm_d; }
/* a region mark is no work */
static void count_mark(int region) { (void)region; }
/* the bf16 copy of the weights after each update: read fp32, write act; one rounding (1 FLOP);
 * the fp32 table's is a device copy */
static void count_to_act(void *dst, const float *src, int64_t n) {
  (void)dst, (void)src;
  if (n <= 0) return;
  if (g.act == TXL_F32)
    move(TXL_COUNT_OPTIMIZER, 8.0 * (double)n);
  else
    add(TXL_COUNT_OPTIMIZER, (double)n, (double)n * (4.0 + act_bytes()));
}

/* ---- dense algebra ------------------------------------------------------------------------- */

/* 2 M N K on the tensor cores (bf16 or fp16 operands, or TF32) or the CUDA cores (fp32); A and B read,
 * C read when beta != 0 (and scaled when K = 0, 1 FLOP each), C written. */
/* x starts on 16 bytes and its rows (ld elements of `size` bytes) lie a multiple of 16 apart */
static int on16(const void *x, int ld, size_t size) {
  return (uintptr_t)x % 16 == 0 && ((size_t)ld * size) % 16 == 0;
}

static TxlCountFamily gemm_family_of(const void *A, const void *B, const void *C, int *weight) {
  *weight = -1;
  switch (g.gemm_family ? g.gemm_family(g.gemm_ctx, A, B, C, weight) : TXL_GEMM_OF_IO) {
  case TXL_GEMM_OF_FFN: return TXL_COUNT_GEMM_FFN;
  case TXL_GEMM_OF_PROJ: return TXL_COUNT_GEMM_ATTN_PROJ;
  case TXL_GEMM_OF_IO: break;
  }
  return TXL_COUNT_GEMM_IO;
}

static void count_gemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const void *A, int lda,
                       const void *B, int ldb, float beta, void *C, int ldc, TxlDtype c_type) {
  (void)trans_a, (void)trans_b, (void)alpha;
  int w;
  const TxlCountFamily f = gemm_family_of(A, B, C, &w);
  const int ok[3] = {on16(A, lda, txl_dtype_size(g.act)), on16(B, ldb, txl_dtype_size(g.act)),
                     on16(C, ldc, txl_dtype_size(c_type))};
  g.align.calls += 1.0;
  g.align.all_aligned += ok[0] && ok[1] && ok[2];
  if (w >= 0) {
    g.align.weight_calls += 1.0;
    g.align.weight_aligned += ok[w];
  }
  const double mn = (double)M * N, c = (double)txl_dtype_size(c_type);
  const double bytes = ((double)M * K + (double)K * N) * act_bytes() + mn * c * (beta != 0.0f ? 2.0 : 1.0);
  const double flops = K > 0 ? 2.0 * mn * K : (beta != 0.0f ? mn : 0.0);
  if (K > 0 && (g.act != TXL_F32 || g.tf32)) {
    g.cost[f].tensor_flops += flops;
    add(f, 0.0, bytes);
  } else {
    add(f, flops, bytes);
  }
}
/* writes rows x n, reads b */
static void count_bias_fill(void *x, const float *b, int64_t rows, int n) {
  (void)x, (void)b;
  add(TXL_COUNT_OTHER, 0.0, (double)rows * n * act_bytes() + 4.0 * n);
}
/* reads dy, db read and written; 1 FLOP (an addition) per element of dy; 2 launches (the
 * partial sums of row chunks, then their sum into db) */
static void count_bias_backward(float *db, const void *dy, int64_t rows, int n, int ld) {
  (void)db, (void)dy, (void)ld;
  if (rows <= 0 || n <= 0) return;
  add_n(TXL_COUNT_OTHER, (double)rows * n, (double)rows * n * act_bytes() + 8.0 * n, 2.0);
}
/* The fused GEMMs, counted as cuBLASLt running the epilogue in the GEMM's one launch (the
 * unfused fallback of a GPU that lacks it costs what bias_fill / bias_backward and gemm cost).
 * The epilogue's element-wise FLOPs run on the CUDA cores: they go to "other" (no launch of its
 * own), so that the GEMM families hold the products alone. */
/* the product as gemm with beta 0 (C written once), plus the bias read once and 1 FLOP per element
 * of C for its addition (1 more for the ReLU's select) */
static void count_gemm_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B,
                            int ldb, const void *bias, int relu, void *C, int ldc) {
  (void)bias;
  count_gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, g.act);
  int w;
  const TxlCountFamily f = gemm_family_of(A, B, C, &w);
  g.cost[TXL_COUNT_OTHER].core_flops += (relu ? 2.0 : 1.0) * (double)M * N;
  g.cost[f].bytes += (double)N * act_bytes();
}
/* the product as gemm into fp32 dw with beta 1; the epilogue sums dy's K rows (1 FLOP per element
 * of dy, which the GEMM reads anyway) and writes n floats; then one launch adds them to db (reads
 * db and the vector, writes db) */
static void count_gemm_wgrad_bias(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda,
                                  const void *B, int ldb, float *dw, int lddw, float *db, int dy_is_a) {
  (void)db;
  count_gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, dw, lddw, TXL_F32);
  const double n = dy_is_a ? M : N;
  int w;
  const TxlCountFamily f = gemm_family_of(A, B, dw, &w);
  g.cost[TXL_COUNT_OTHER].core_flops += (double)K * n;
  g.cost[f].bytes += 4.0 * n;
  add(TXL_COUNT_OTHER, n, 12.0 * n);
}
/* reads a and b, writes out; 1 FLOP per element */
static void count_add(void *out, const void *a, const void *b, int64_t n, TxlDtype t) {
  (void)out, (void)a, (void)b;
  add(TXL_COUNT_OTHER, (double)n, 3.0 * (double)n * (double)txl_dtype_size(t));
}
/* A sum over x [n] in chunks (kernels/cuda/elementwise.cu: chunked_sum_device): the chunks'
 * partial sums (a launch when n > 0), then their sum (a launch). */
static double chunked_launches(int64_t n) { return n > 0 ? 2.0 : 1.0; }

/* reads x; 2 FLOPs (a multiply and an addition) per element */
static double count_sumsq(const float *x, int64_t n) {
  (void)x;
  if (n <= 0) return 0.0;
  add_n(TXL_COUNT_OPTIMIZER, 2.0 * (double)n, 4.0 * (double)n, chunked_launches(n));
  return 0.0;
}

/* The floats from the first segment's start to the last one's end (gaps included); 0 for none. */
static int64_t segments_span(int n_seg, const int64_t *seg) {
  return n_seg > 0 ? seg[2 * (n_seg - 1)] + seg[2 * (n_seg - 1) + 1] - seg[0] : 0;
}

/* the CUDA backend's sum of squares over the whole span of the segments */
static double count_sumsq_segments(const float *x, int n_seg, const int64_t *seg) {
  return count_sumsq(x, segments_span(n_seg, seg));
}

/* sumsq_segments' pass; its last kernel makes the record (a few FLOPs and the record's bytes, not
 * counted: nothing beside a pass over the gradient), and runs even over no segments */
static void count_grad_clip(TxlGradClip *r, const float *gr, int n_seg, const int64_t *seg, float clip,
                            double loss_scale) {
  (void)r, (void)gr, (void)clip, (void)loss_scale;
  const int64_t n = segments_span(n_seg, seg);
  add_n(TXL_COUNT_OPTIMIZER, 2.0 * (double)n, 4.0 * (double)n, chunked_launches(n));
}

/* the CUDA backend's geometry itself (host arithmetic, nothing runs) */
static int count_norm_parts(int64_t *bounds, int n_seg, const int64_t *seg) { return txl_cuda_norm_parts(bounds, n_seg, seg); }

/* the first kernel over the parts [p0, p1): each of their elements read once, 2 FLOPs each */
static void count_sumsq_parts(double *part, const float *x, int n_seg, const int64_t *seg, int p0, int p1) {
  (void)part, (void)x;
  int64_t bounds[TXL_NORM_PARTS_MAX + 1];
  txl_cuda_norm_parts(bounds, n_seg, seg);
  const double n = p1 > p0 ? (double)(bounds[p1] - bounds[p0]) : 0.0;
  add_n(TXL_COUNT_OPTIMIZER, 2.0 * n, 4.0 * n, 1.0);
}

/* the second kernel: the parts read, the record made (a few FLOPs, not counted) */
static void count_grad_clip_parts(TxlGradClip *r, const double *part, int n_parts, float clip, double loss_scale) {
  (void)r, (void)part, (void)clip, (void)loss_scale;
  add_n(TXL_COUNT_OPTIMIZER, (double)n_parts, 8.0 * (double)n_parts, 1.0);
}

/* reads x; no floating-point work (integer mixing and sums) */
static uint64_t count_digest(const float *x, int64_t n) {
  (void)x;
  if (n <= 0) return 0;
  add_n(TXL_COUNT_OPTIMIZER, 0.0, 4.0 * (double)n, chunked_launches(n));
  return 0;
}

/* ---- embedding and positions --------------------------------------------------------------- */

/* reads the tokens twice (the counts, then the slots) and writes the head targets and every slot
 * of rows and ids once; integer work only (kernels/cuda/adaptive_group.cu: one launch) */
static void count_adaptive_group(int32_t *rows, int32_t *ids, int32_t *head, int32_t *count, int32_t *dropped,
                                 const int32_t *tok, int64_t n, TxlGroupSpec gs) {
  (void)rows, (void)ids, (void)count, (void)dropped, (void)tok;
  double slots = 0.0;
  for (int i = gs.first; i <= gs.last; i++) slots += gs.cap[i];
  add(TXL_COUNT_EMBEDDING, 0.0, 8.0 * (double)n + (head ? 4.0 * (double)n : 0.0) + 8.0 * slots);
}

/* reads the tokens and n rows of the table, writes out; 1 FLOP (the scale) per element */
static void count_embedding_forward(void *out, const int32_t *tok, const void *emb, float scale, int64_t n, int d,
                                    int lde, int ldo) {
  (void)out, (void)tok, (void)emb, (void)scale, (void)lde, (void)ldo;
  add(TXL_COUNT_EMBEDDING, (double)n * d, 4.0 * (double)n + 2.0 * (double)n * d * act_bytes());
}
/* reads dout and the tokens, the gradient rows read and written; the sort of the positions by
 * token reads and writes n (key, position) pairs once (16 n bytes); 2 FLOPs (scale, add) per
 * element. Launches: the radix sort's 4 passes of 3 kernels (count, scan, scatter), then the rows'
 * sums (kernels/cuda/embedding.cu). */
static void count_embedding_backward(void *demb, TxlDtype demb_type, const void *dout, const int32_t *tok, float scale,
                                     int64_t n, int d, int lde, int ldo) {
  (void)demb, (void)dout, (void)tok, (void)scale, (void)lde, (void)ldo;
  if (n <= 0 || d <= 0) return;
  const double nd = (double)n * d;
  add_n(TXL_COUNT_EMBEDDING, 2.0 * nd,
        nd * act_bytes() + 2.0 * nd * (double)txl_dtype_size(demb_type) + 4.0 * (double)n + 16.0 * (double)n,
        4.0 * 3.0 + 1.0);
}
/* writes R; a sine or cosine (counted as 1 FLOP, computed in double) and 2 FLOPs for its argument
 * per element */
static void count_posemb_forward(void *R, int K, int d, int ld, int clamp_len) {
  (void)R, (void)ld, (void)clamp_len;
  add(TXL_COUNT_EMBEDDING, 3.0 * (double)K * d, (double)K * d * act_bytes());
}

/* ---- dropout ------------------------------------------------------------------------------- */

/* nothing when p = 0 (no launch); else x read and written, 1 FLOP (the keep x scale) per element */
static void count_dropout(void *x, int rows, int cols, int feats, int ld, int col0, TxlDropout d) {
  (void)x, (void)col0, (void)ld;
  if (d.p == 0.0f || rows <= 0 || cols <= 0 || feats <= 0) return;
  const double n = (double)rows * cols * feats;
  add(TXL_COUNT_DROPOUT, n, 2.0 * n * act_bytes());
}

/* ---- fused FFN hidden layer ---------------------------------------------------------------- */

/* a read and written, ad written when p > 0, b read; 2 FLOPs (add, max) per element, 1 more for
 * the dropout */
static void count_bias_relu_dropout_forward(void *a, void *ad, const float *b, int rows, int cols, int feats, int ld,
                                            int col0, TxlDropout drop) {
  (void)a, (void)ad, (void)b, (void)col0, (void)ld;
  const double n = (double)rows * cols * feats, dr = drop.p > 0.0f ? 1.0 : 0.0;
  add(TXL_COUNT_FFN_ELEMENTWISE, (2.0 + dr) * n, (2.0 + dr) * n * act_bytes() + 4.0 * feats);
}
/* dx read and written, a read; 1 FLOP (the ReLU's select) per element, 1 more for the dropout */
static void count_relu_dropout_backward(void *dx, const void *a, int rows, int cols, int feats, int ld, int col0,
                                        TxlDropout drop) {
  (void)dx, (void)a, (void)col0, (void)ld;
  const double n = (double)rows * cols * feats, dr = drop.p > 0.0f ? 1.0 : 0.0;
  add(TXL_COUNT_FFN_ELEMENTWISE, (1.0 + dr) * n, 3.0 * n * act_bytes());
}

/* ---- layer norm ---------------------------------------------------------------------------- */
/* Per element: forward 7 FLOPs (mean: 1; variance: 2; normalise, scale, shift: 4), one more for
 * the residual addition; backward 10 (the two row sums: 4; dinp: 4; dw, db: 2), 1 more for the
 * dropout of the branch gradient and 1 for a += into dinp. Row statistics are fp32 [n]; w, b, dw,
 * db fp32 [d] (dw and db read and written). */

static void count_layernorm_forward(void *out, float *mean, float *rstd, const void *inp, const float *w,
                                    const float *b, int64_t n, int d, int ld, float eps) {
  (void)out, (void)mean, (void)rstd, (void)inp, (void)w, (void)b, (void)eps, (void)ld;
  const double nd = (double)n * d;
  add(TXL_COUNT_LAYERNORM, 7.0 * nd, 2.0 * nd * act_bytes() + 8.0 * (double)n + 8.0 * d);
}
static void count_layernorm_backward(void *dinp, float *dw, float *db, const void *dout, const void *inp,
                                     const float *w, const float *mean, const float *rstd, int64_t n, int d,
                                     int ld) {
  (void)dw, (void)db, (void)dout, (void)inp, (void)w, (void)mean, (void)rstd, (void)ld;
  if (n <= 0 || d <= 0) return;
  /* launches: dinp's kernel (when there is dinp), then dw and db in two (row chunks' partial sums,
   * their sum: kernels/cuda/layernorm.cu) */
  const double nd = (double)n * d, acc = dinp ? 1.0 : 0.0; /* dinp read and written (+=) */
  add_n(TXL_COUNT_LAYERNORM, (10.0 + acc) * nd, (2.0 + 2.0 * acc) * nd * act_bytes() + 8.0 * (double)n + 20.0 * d,
        acc + 2.0);
}
static void count_add_layernorm_forward(void *res, void *out, float *mean, float *rstd, const void *x, const void *y,
                                        const float *w, const float *b, int64_t n, int d, int ld, float eps) {
  (void)res, (void)out, (void)mean, (void)rstd, (void)x, (void)y, (void)w, (void)b, (void)eps, (void)ld;
  const double nd = (double)n * d;
  add(TXL_COUNT_LAYERNORM, 8.0 * nd, 4.0 * nd * act_bytes() + 8.0 * (double)n + 8.0 * d);
}
static void count_layernorm_backward_dropout(void *dinp, void *dbranch, float *dw, float *db, const void *dout,
                                             const void *inp, const float *w, const float *mean, const float *rstd,
                                             int rows, int cols, int d, int ld, int col0, TxlDropout drop) {
  (void)dinp, (void)dbranch, (void)dw, (void)db, (void)dout, (void)inp, (void)w, (void)mean, (void)rstd, (void)col0,
      (void)ld;
  if (rows <= 0 || cols <= 0 || d <= 0) return;
  const double n = (double)rows * cols, nd = n * d, dr = drop.p > 0.0f ? 1.0 : 0.0;
  /* launches: the input's and the branch's gradient, then dw and db in two (as layernorm_backward) */
  add_n(TXL_COUNT_LAYERNORM, (10.0 + dr) * nd, 4.0 * nd * act_bytes() + 8.0 * n + 20.0 * d, 3.0);
}

/* ---- relative multi-head attention: the kernels' own count --------------------------------- */

static void count_rel_attn_forward(void *vec, float *saved, const void *q, const void *kv, const void *r,
                                   const float *u, const float *vb, const float *rb, TxlAttnShape s, TxlDropout drop,
                                   void *work) {
  (void)vec, (void)saved, (void)q, (void)kv, (void)u, (void)vb, (void)drop, (void)work;
  touch(TXL_COUNT_ATTENTION);
  txl_cuda_rel_attn_cost(s, g.act, g.tf32, 0, r != NULL, rb != NULL, &g.cost[TXL_COUNT_ATTENTION]);
}
static void count_rel_attn_backward(void *dq, void *dkv, void *dr, float *du, float *dvb, float *drb,
                                    const void *dvec, const void *vec, const void *q, const void *kv, const void *r,
                                    const float *u, const float *vb, const float *rb, const float *saved,
                                    TxlAttnShape s, TxlDropout drop, void *work) {
  (void)dq, (void)dkv, (void)dr, (void)du, (void)dvb, (void)drb, (void)dvec, (void)vec, (void)q, (void)kv, (void)u,
      (void)vb, (void)saved, (void)drop, (void)work;
  touch(TXL_COUNT_ATTENTION);
  txl_cuda_rel_attn_cost(s, g.act, g.tf32, 1, r != NULL, rb != NULL, &g.cost[TXL_COUNT_ATTENTION]);
}
/* the buffers the CUDA backend asks for, so that the model lays out what it would on a GPU */
static size_t count_rel_attn_saved_floats(int L, int K, int B, int H) {
  return txl_cuda_rel_attn_saved_floats(L, K, B, H);
}
static size_t count_rel_attn_workspace(int L, int K, int B, int H, int dh, int backward) {
  return txl_cuda_rel_attn_workspace(L, K, B, H, dh, backward);
}

/* ---- loss ---------------------------------------------------------------------------------- */

/* logits read, and written as the gradient when grad_scale != 0; targets read, losses written.
 * 4 FLOPs per logit (max, subtract, exp, sum), 2 more for the gradient (divide, scale). */
static void count_xent_forward_backward(void *logits, float *loss, const int32_t *target, float grad_scale, int64_t n,
                                        int V, int ld) {
  (void)logits, (void)loss, (void)target, (void)ld;
  const double nv = (double)n * V, gr = grad_scale != 0.0f ? 1.0 : 0.0;
  add(TXL_COUNT_SOFTMAX_XENT, (4.0 + 2.0 * gr) * nv, (1.0 + gr) * nv * act_bytes() + 8.0 * (double)n);
}

/* one thread, n adds in double: n loss values read, one double read and written */
static void count_loss_sum(double *sum, const float *loss, int64_t n, int accumulate) {
  (void)sum, (void)loss, (void)accumulate;
  add(TXL_COUNT_SOFTMAX_XENT, (double)n, 4.0 * (double)n + 16.0);
}

/* ---- optimizer ----------------------------------------------------------------------------- */

/* p, g, m, v read; p, m, v written (fp32); 12 FLOPs per element (the scale of g, two moment
 * updates of 3, the square root, the division, the step's 3) */
static void count_adam_update(float *p, const float *gr, float *m, float *v, int64_t n, float lr, float beta1,
                              float beta2, float eps, int step, float grad_scale) {
  (void)p, (void)gr, (void)m, (void)v, (void)lr, (void)beta1, (void)beta2, (void)eps, (void)step, (void)grad_scale;
  add(TXL_COUNT_OPTIMIZER, 12.0 * (double)n, 28.0 * (double)n);
}

/* SGD: reads p, g, buf, writes p, buf (20 bytes); g * scale, momentum * buf + g', lr * buf, p -= :
 * 4 FLOPs an element */
static void count_sgd_update(float *p, const float *gr, float *buf, int64_t n, float lr, float momentum,
                             float grad_scale, int first) {
  (void)p, (void)gr, (void)buf, (void)lr, (void)momentum, (void)grad_scale, (void)first;
  add(TXL_COUNT_OPTIMIZER, 4.0 * (double)n, 20.0 * (double)n);
}

/* LAMB's moments: reads g, p, m, v, writes g, m, v (28 bytes); scale, m (3), v (4), the direction
 * (two divisions, a division and sqrt, + eps, wd * p +): 15 FLOPs an element */
static void count_lamb_moments(float *gr, const float *p, float *m, float *v, int64_t n, float beta1, float beta2,
                               float eps, float weight_decay, int step, float grad_scale) {
  (void)gr, (void)p, (void)m, (void)v, (void)beta1, (void)beta2, (void)eps, (void)weight_decay, (void)step,
      (void)grad_scale;
  add(TXL_COUNT_OPTIMIZER, 15.0 * (double)n, 28.0 * (double)n);
}

/* y += a x: reads x, y, writes y (12 bytes), 2 FLOPs an element */
static void count_axpy(float *y, const float *x, float a, int64_t n) {
  (void)y, (void)x, (void)a;
  add(TXL_COUNT_OPTIMIZER, 2.0 * (double)n, 12.0 * (double)n);
}

/* The fused passes: the unfused op's bytes and FLOPs, plus the act-type copy of p written (act
 * bytes and 1 FLOP, the rounding, an element; nothing on the fp32 table, whose weights are their
 * own copy) and the gradient written with zeros (4 bytes an element), in the one launch. */
static double copy_bytes(void) { return g.act == TXL_F32 ? 0.0 : act_bytes(); }
static double copy_flops(void) { return g.act == TXL_F32 ? 0.0 : 1.0; }
static void count_adam_fused(float *p, void *p_act, float *gr, float *m, float *v, int64_t n, const TxlOptimStep *s,
                             const float *grad_scale) {
  (void)p, (void)p_act, (void)gr, (void)m, (void)v, (void)s, (void)grad_scale;
  add(TXL_COUNT_OPTIMIZER, (12.0 + copy_flops()) * (double)n, (28.0 + copy_bytes() + 4.0) * (double)n);
}
static void count_sgd_fused(float *p, void *p_act, float *gr, float *buf, int64_t n, const TxlOptimStep *s,
                            const float *grad_scale) {
  (void)p, (void)p_act, (void)gr, (void)buf, (void)s, (void)grad_scale;
  add(TXL_COUNT_OPTIMIZER, (4.0 + copy_flops()) * (double)n, (20.0 + copy_bytes() + 4.0) * (double)n);
}
static void count_axpy_fused(float *y, void *y_act, float *x, float a, int64_t n) {
  (void)y, (void)y_act, (void)x, (void)a;
  add(TXL_COUNT_OPTIMIZER, (2.0 + copy_flops()) * (double)n, (12.0 + copy_bytes() + 4.0) * (double)n);
}

/* ---- the tables ---------------------------------------------------------------------------- */

/* Every op of kernels/ops.def: an op without its count_ function above does not compile. */
static TxlOps make_table(TxlDtype act) {
  TxlOps t;
  memset(&t, 0, sizeof t);
  t.name = act == TXL_BF16 ? "count-bf16" : act == TXL_F16 ? "count-fp16" : "count";
  t.act = act;
  t.row_align = 8; /* the CUDA backend's layout */
#define TXL_OP(kind, ret, name, params) t.name = count_##name;
#include "kernels/ops.def"
#undef TXL_OP
  return t;
}

const TxlOps *txl_count_ops(TxlDtype act, int tf32) {
  static TxlOps f32, bf16, f16;
  static int made = 0;
  if (!made) {
    f32 = make_table(TXL_F32);
    bf16 = make_table(TXL_BF16);
    f16 = make_table(TXL_F16);
    made = 1;
  }
  if (act != TXL_F32 && act != TXL_BF16 && act != TXL_F16)
    txl_fatal("internal: no counting table for activations of type %d", (int)act);
  g.act = act;
  g.tf32 = act == TXL_F32 && tf32;
  txl_count_reset();
  return act == TXL_BF16 ? &bf16 : act == TXL_F16 ? &f16 : &f32;
}
