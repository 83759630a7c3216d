#include "src/base/zipf.h"

#include <stdlib.h>

#include "src/base/error.h"

void txl_zipf_make(TxlZipf *z, int V) {
  if (V < 1) txl_fatal("internal: a Zipf law over %d ids", V);
  z->V = V;
  z->cdf = txl_malloc((size_t)V * sizeof *z->cdf, "Zipf table");
  double s = 0.0;
  for (int i = 0; i < V; i++) z->cdf[i] = s += 1.0 / (i + 1.0);
  for (int i = 0; i < V; i++) z->cdf[i] /= s;
}

void txl_zipf_free(TxlZipf *z) {
  free(z->cdf);
  z->cdf = NULL;
}

int32_t txl_zipf_id(const TxlZipf *z, TxlPhilox4 w) {
  const double u = ((double)(w.v[0] >> 5) * 67108864.0 + (double)(w.v[1] >> 6)) / 9007199254740992.0;
  int lo = 0, hi = z->V - 1; /* the first id whose cdf exceeds u */
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (z->cdf[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
