/* Synthetic token ids with the frequencies of text: Zipf's law with exponent 1 over ids sorted by
 * frequency (txl-prep's ids: id i has weight 1 / (i + 1)), drawn by inverse CDF from a Philox
 * word pair (philox.h). Used by --bench's tokens and the counting tool's, so that the adaptive
 * softmax's clusters get the shares a corpus gives them. */
#ifndef TXL_BASE_ZIPF_H
#define TXL_BASE_ZIPF_H

#include <stdint.h>

#include "src/base/philox.h"

typedef struct {
  double *cdf; /* [V] */
  int V;
} TxlZipf;

void txl_zipf_make(TxlZipf *z, int V); /* V >= 1; ends the job when out of memory */
void txl_zipf_free(TxlZipf *z);
/* The id whose interval holds the uniform in [0, 1) made of 53 bits of w.v[0] and w.v[1]. */
int32_t txl_zipf_id(const TxlZipf *z, TxlPhilox4 w);

#endif
