#include "data/varlen.h"

#include <math.h>

#include "src/base/philox.h"

/* the Philox key's second word: this stream's own, apart from the dropout sites (small numbers) */
#define VARLEN_KEY 0x766c656eu /* "vlen" */

/* A uniform in [0, 1) from the top 24 bits of a Philox word. */
static double uniform(uint32_t w) { return (double)(w >> 8) * (1.0 / 16777216.0); }

int txl_varlen_rows(uint32_t seed, int step, int tgt_len) {
  const TxlPhilox4 w = txl_philox4x32_10((uint32_t)step, 0u, 0u, 0u, seed, VARLEN_KEY);
  const double bptt = uniform(w.v[0]) < 0.95 ? (double)tgt_len : tgt_len / 2.0;
  /* Box-Muller: 1 - u is in (0, 1], so the logarithm is finite */
  const double z = sqrt(-2.0 * log(1.0 - uniform(w.v[1]))) * cos(2.0 * M_PI * uniform(w.v[2]));
  const double x = trunc(bptt + TXL_VARLEN_STD * z);
  const int most = txl_varlen_max_rows(tgt_len, 1);
  if (x < TXL_VARLEN_MIN) return TXL_VARLEN_MIN;
  return x > most ? most : (int)x;
}
