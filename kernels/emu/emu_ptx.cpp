/* The emulator's models of mma.sync, ldmatrix, cvt.rna.tf32 and cp.async (emu_ptx.h says what
 * each checks; kernels/cuda/ptx.h gives the fragment layouts, which the decoders below follow
 * element by element). */
#include "kernels/emu/emu_ptx.h"

#include <math.h>
#include <string.h>

#include <vector>

#include "kernels/common/bf16.h"
#include "kernels/common/fp16.h"
#include "kernels/emu/emu_arch.h"
#include "kernels/emu/emu_internal.h"

/* ---- the warp-wide instructions: their exchanges (emu_warp_exchange's numbers) ------------- */
enum {
  EX_MMA_FIRST = 0,               /* + TxlEmuMma */
  EX_LDMATRIX_FIRST = 4,          /* + 2 (log2 n) + trans */
  EX_COUNT = EX_LDMATRIX_FIRST + 6,
};
static const char *const kExchangeName[EX_COUNT] = {
    "mma.sync.m16n8k16 (bf16)",    "mma.sync.m16n8k16 (f16)",    "mma.sync.m16n8k8 (tf32)",
    "mma.sync.m16n8k8 (f16)",      "ldmatrix.x1",                "ldmatrix.x1.trans",
    "ldmatrix.x2",                 "ldmatrix.x2.trans",          "ldmatrix.x4",
    "ldmatrix.x4.trans"};

const char *emu_exchange_name(int i) { return i >= 0 && i < EX_COUNT ? kExchangeName[i] : "a warp instruction"; }

static int arch_sm(void) { return txl_emu_arch().major * 10 + txl_emu_arch().minor; }

/* the instruction needs sm_<need>: a device of an older architecture would trap */
static void need_arch(const char *what, int need) {
  if (arch_sm() < need)
    emu_kernel_fail("%s needs sm_%d; the emulated device is %s (TXL_EMU_ARCH): a kernel using it must not be "
                    "launched there",
                    what, need, txl_emu_arch().id);
}

/* ---- mma.sync --------------------------------------------------------------------------------- */
struct MmaShape {
  int k;      /* the inner dimension: 16 or 8 */
  int a_regs; /* 32-bit registers per lane of A and of B */
  int b_regs;
  int sm;     /* the oldest architecture with it */
};
static const MmaShape kMma[] = {{16, 4, 2, 80}, {16, 4, 2, 80}, {8, 4, 2, 80}, {8, 2, 1, 75}};

struct MmaFragments {
  uint32_t a[4], b[2];
};

/* element value of a 16-bit operand: bf16 or f16 */
static double half_value(TxlEmuMma shape, uint32_t reg, int h) {
  const uint16_t bits = (uint16_t)(reg >> (16 * h));
  return shape == TXL_EMU_MMA_BF16_M16N8K16 ? (double)txl_bf16_to_float(bits)
                                            : (double)txl_fp16_to_float(txl_fp16_from_bits(bits));
}

static float tf32_value(uint32_t reg) {
  float f;
  memcpy(&f, &reg, sizeof f);
  return f;
}

/* what lane (g, t) of the warp reads of A [16][k] and B [k][8], from the fragments of the lanes
 * holding it (ptx.h's layouts): A's rows g and g + 8, which lanes 4g .. 4g + 3 hold, and B's
 * columns 2t and 2t + 1, which lanes 8t .. 8t + 7 hold; the rest of A and B is left unset (a
 * lane decoding only its own inputs: the same values, an eighth of the conversions) */
static void decode(TxlEmuMma shape, const unsigned char (*lanes)[EMU_WARP_PAYLOAD], int my_g, int my_t,
                   double A[16][16], double B[16][8]) {
  for (int lane = 0; lane < WARP; lane++) {
    const int g = lane / 4, t = lane % 4;
    const bool rows = g == my_g, cols = g / 2 == my_t;
    if (!rows && !cols) continue;
    MmaFragments f;
    memcpy(&f, lanes[lane], sizeof f);
    switch (shape) {
    case TXL_EMU_MMA_BF16_M16N8K16:
    case TXL_EMU_MMA_F16_M16N8K16:
      if (rows)
        for (int i = 0; i < 8; i++) A[g + 8 * ((i / 2) % 2)][2 * t + i % 2 + 8 * (i / 4)] = half_value(shape, f.a[i / 2], i % 2);
      if (cols)
        for (int j = 0; j < 4; j++) B[2 * t + j % 2 + 8 * (j / 2)][g] = half_value(shape, f.b[j / 2], j % 2);
      break;
    case TXL_EMU_MMA_TF32_M16N8K8:
      if (rows)
        for (int i = 0; i < 4; i++) A[g + 8 * (i % 2)][t + 4 * (i / 2)] = tf32_value(f.a[i]);
      if (cols)
        for (int j = 0; j < 2; j++) B[t + 4 * j][g] = tf32_value(f.b[j]);
      break;
    case TXL_EMU_MMA_F16_M16N8K8:
      if (rows)
        for (int i = 0; i < 4; i++) A[g + 8 * (i / 2)][2 * t + i % 2] = half_value(shape, f.a[i / 2], i % 2);
      if (cols)
        for (int j = 0; j < 2; j++) B[2 * t + j][g] = half_value(shape, f.b[0], j);
      break;
    }
  }
}

/* a tf32 operand: the low 13 bits clear (or a NaN, whatever its bits) */
static bool is_tf32(uint32_t bits) { return (bits & 0x1fffu) == 0 || ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu)); }

void txl_emu_mma(TxlEmuMma shape, float d[4], const uint32_t *a, const uint32_t *b, const float c[4]) {
  const MmaShape &s = kMma[shape];
  const char *name = kExchangeName[EX_MMA_FIRST + shape];
  need_arch(name, s.sm);
  MmaFragments mine;
  memset(&mine, 0, sizeof mine);
  memcpy(mine.a, a, (size_t)s.a_regs * sizeof *a);
  memcpy(mine.b, b, (size_t)s.b_regs * sizeof *b);
  if (shape == TXL_EMU_MMA_TF32_M16N8K8)
    for (int i = 0; i < 6; i++) {
      const uint32_t v = i < 4 ? mine.a[i] : mine.b[i - 4];
      if (!is_tf32(v))
        emu_kernel_fail("%s: operand %c[%d] is 0x%08x, not a tf32 (its low 13 bits are set): round it with "
                        "txl_tf32_from_float (the device's use of those bits is not documented)",
                        name, i < 4 ? 'a' : 'b', i < 4 ? i : i - 4, v);
    }
  const float cc[4] = {c[0], c[1], c[2], c[3]}; /* d may alias c */
  const unsigned char (*lanes)[EMU_WARP_PAYLOAD] = emu_warp_exchange(EX_MMA_FIRST + shape, &mine, sizeof mine);
  const int lane = emu_thread_linear(name) % WARP, g = lane / 4, t = lane % 4;
  double A[16][16], B[16][8];
  decode(shape, lanes, g, t, A, B);
  for (int i = 0; i < 4; i++) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    double sum = (double)cc[i];
    for (int k = 0; k < s.k; k++) sum += A[row][k] * B[k][col];
    d[i] = (float)sum;
  }
}

uint32_t txl_emu_tf32_from_float(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x7fffffu) ? 0x7fffffffu : u; /* NaN, inf */
  /* to nearest, ties away from zero: half of the last kept bit added to the magnitude (a carry
   * into the exponent is the right result, up to inf) */
  return (u + 0x1000u) & ~0x1fffu;
}

/* ---- ldmatrix --------------------------------------------------------------------------------- */
void txl_emu_ldmatrix(int n, int trans, uint32_t *r, const void *row) {
  const int log2n = n == 1 ? 0 : n == 2 ? 1 : 2;
  const int ex = EX_LDMATRIX_FIRST + 2 * log2n + (trans ? 1 : 0);
  const char *name = kExchangeName[ex];
  need_arch(name, 75);
  const int lane = emu_thread_linear(name) % WARP;
  /* the lanes whose address is read; on sm_75 every lane must hold a valid one */
  const bool read = lane < 8 * n, checked = read || arch_sm() < 80;
  if (checked && ((uintptr_t)row % 16 != 0 || !emu_in_dynamic_shared(row, 16)))
    emu_kernel_fail("%s: lane %d's row address %p is %s", name, lane, row,
                    (uintptr_t)row % 16 ? "not 16-byte aligned"
                                        : "not 16 bytes inside the launch's dynamic shared memory");
  const unsigned char (*lanes)[EMU_WARP_PAYLOAD] = emu_warp_exchange(ex, &row, sizeof row);
  const unsigned char *addr[32];
  for (int l = 0; l < 8 * n; l++) memcpy(&addr[l], lanes[l], sizeof addr[l]);
  for (int m = 0; m < n; m++) {
    uint16_t e[2];
    for (int j = 0; j < 2; j++) {
      /* not transposed: row lane / 4, column 2 (lane % 4) + j; transposed: row 2 (lane % 4) + j,
       * column lane / 4 (rows of 8 16-bit elements) */
      const unsigned char *p = trans ? addr[8 * m + 2 * (lane % 4) + j] + 2 * (lane / 4)
                                     : addr[8 * m + lane / 4] + 2 * (2 * (lane % 4) + j);
      memcpy(&e[j], p, sizeof e[j]);
    }
    r[m] = (uint32_t)e[0] | (uint32_t)e[1] << 16;
  }
}

/* ---- cp.async --------------------------------------------------------------------------------- */
struct CpCopy {
  unsigned char *dst;
  unsigned char data[16]; /* the source's bytes as read at issue, zeros past src_bytes */
  int bytes;
};
struct CpThread {
  std::vector<CpCopy> open;                 /* issued, not committed yet */
  std::vector<std::vector<CpCopy>> groups;  /* committed, oldest first, not waited for */
};
static std::vector<CpThread> g_cp; /* by linear thread index in the block */

static CpThread &cp_thread(const char *what) {
  const int lin = emu_thread_linear(what);
  if ((size_t)lin >= g_cp.size()) g_cp.resize((size_t)lin + 1);
  return g_cp[(size_t)lin];
}

void txl_emu_cp_async(void *dst, const void *src, int bytes, int src_bytes) {
  const char *name = bytes == 16 ? "cp.async.cg" : "cp.async.ca";
  need_arch(name, 80);
  if (bytes != 4 && bytes != 8 && bytes != 16)
    emu_kernel_fail("cp.async of %d bytes: the sizes are 4, 8 and 16", bytes);
  if (src_bytes < 0 || src_bytes > bytes)
    emu_kernel_fail("%s of %d bytes reading %d: the source size must be in [0, %d]", name, bytes, src_bytes, bytes);
  if ((uintptr_t)dst % (uintptr_t)bytes || (uintptr_t)src % (uintptr_t)bytes)
    emu_kernel_fail("%s of %d bytes from %p to %p: both addresses must be %d-byte aligned", name, bytes, src, dst,
                    bytes);
  if (!emu_in_dynamic_shared(dst, (size_t)bytes))
    emu_kernel_fail("%s to %p: the destination is not %d bytes inside the launch's dynamic shared memory", name,
                    dst, bytes);
  if (src_bytes > 0 && !emu_in_device_memory(src, (size_t)src_bytes))
    emu_kernel_fail("%s from %p: the %d bytes read are not inside one device allocation (cudaMalloc)", name, src,
                    src_bytes);
  CpCopy c;
  c.dst = (unsigned char *)dst;
  c.bytes = bytes;
  memset(c.data, 0, sizeof c.data);
  if (src_bytes > 0) memcpy(c.data, src, (size_t)src_bytes);
  memset(dst, 0xFF, (size_t)bytes); /* NaN bytes until the wait */
  cp_thread(name).open.push_back(c);
}

void txl_emu_cp_async_commit(void) {
  need_arch("cp.async.commit_group", 80);
  CpThread &t = cp_thread("cp.async.commit_group");
  t.groups.push_back(std::move(t.open));
  t.open.clear();
}

void txl_emu_cp_async_wait(int n) {
  need_arch("cp.async.wait_group", 80);
  CpThread &t = cp_thread("cp.async.wait_group");
  size_t done = 0;
  while (t.groups.size() - done > (size_t)n) { /* the oldest group completes */
    for (const CpCopy &c : t.groups[done]) memcpy(c.dst, c.data, (size_t)c.bytes);
    done++;
  }
  t.groups.erase(t.groups.begin(), t.groups.begin() + (std::ptrdiff_t)done);
}

void emu_ptx_thread_done(int lin) {
  if ((size_t)lin >= g_cp.size()) return;
  CpThread &t = g_cp[(size_t)lin];
  size_t pending = t.open.size();
  for (const auto &g : t.groups) pending += g.size();
  t.open.clear();
  t.groups.clear();
  if (pending)
    emu_kernel_fail("returned with %zu cp.async cop%s not waited for (cp.async.wait_group): the block's "
                    "shared memory ends with it, so the copy can only have been meant for a read that "
                    "never waited",
                    pending, pending == 1 ? "y" : "ies");
}
