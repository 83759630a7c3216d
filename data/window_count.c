/* Sliding-window class counts: see window_count.h. */
#include "data/window_count.h"

#include <stdlib.h>
#include <string.h>

#include "src/base/error.h"

void txl_window_count_init(TxlWindowCount *w, int window, int cols, int group_cols, int n_classes,
                           const int32_t *cut) {
  if (window < 1 || cols < 1 || group_cols < 1 || n_classes < 0 || n_classes > TXL_WINDOW_MAX_CLASSES)
    txl_fatal("internal: window count of window %d, %d columns in groups of %d, %d classes", window, cols, group_cols,
              n_classes);
  memset(w, 0, sizeof *w);
  w->window = window;
  w->cols = cols;
  w->group_cols = group_cols;
  w->n_groups = (cols + group_cols - 1) / group_cols;
  w->n_classes = n_classes;
  for (int k = 0; k <= n_classes; k++) {
    if (k && cut[k] < cut[k - 1])
      txl_fatal("internal: window count classes cut at %d after %d", (int)cut[k], (int)cut[k - 1]);
    w->cut[k] = cut[k];
  }
  const size_t per_row = (size_t)w->n_groups * (size_t)(n_classes > 0 ? n_classes : 1);
  w->ring = txl_calloc((size_t)window * per_row, sizeof *w->ring, "window counts");
  w->sum = txl_calloc(per_row, sizeof *w->sum, "window counts");
  w->most = txl_calloc(per_row, sizeof *w->most, "window counts");
}

void txl_window_count_free(TxlWindowCount *w) {
  free(w->ring);
  free(w->sum);
  free(w->most);
  memset(w, 0, sizeof *w);
}

void txl_window_count_rows(TxlWindowCount *w, const int32_t *tok, int64_t n_rows) {
  const int nk = w->n_classes, per_row = w->n_groups * nk;
  if (!nk) {
    w->rows += n_rows;
    return;
  }
  for (int64_t r = 0; r < n_rows; r++, w->rows++) {
    int32_t *slot = w->ring + (size_t)(w->rows % w->window) * (size_t)per_row;
    /* the row that leaves the window (pushed `window` rows ago) */
    if (w->rows >= w->window)
      for (int i = 0; i < per_row; i++) w->sum[i] -= slot[i];
    memset(slot, 0, (size_t)per_row * sizeof *slot);
    const int32_t *row = tok + (size_t)r * (size_t)w->cols;
    for (int j = 0; j < w->cols; j++) {
      const int32_t t = row[j];
      if (t < w->cut[0] || t >= w->cut[nk]) continue;
      int k = 0;
      while (t >= w->cut[k + 1]) k++;
      slot[(j / w->group_cols) * nk + k]++;
    }
    for (int i = 0; i < per_row; i++) {
      w->sum[i] += slot[i];
      if (w->sum[i] > w->most[i]) w->most[i] = w->sum[i];
    }
  }
}

void txl_window_count_most(const TxlWindowCount *w, int64_t *most) {
  for (int k = 0; k < w->n_classes; k++) {
    most[k] = 0;
    for (int g = 0; g < w->n_groups; g++) {
      const int64_t v = w->most[g * w->n_classes + k];
      most[k] = v > most[k] ? v : most[k];
    }
  }
}

int txl_window_count_split(TxlCorpus *c, const char *split, int B_global, int col0, int B_local, int window,
                           int group_cols, int n_classes, const int32_t *cut, int64_t *most, char *err, size_t cap) {
  const int64_t col_len = txl_corpus_split_length(c, split) / B_global;
  TxlWindowCount w;
  txl_window_count_init(&w, window, B_local, group_cols, n_classes, cut);
  /* blocks of about 4 Mi ids, as many rows as that makes (at least one) */
  const int64_t targets = col_len - 1;
  int64_t step = ((int64_t)1 << 22) / B_local;
  step = step < 1 ? 1 : step > targets ? targets : step;
  const size_t block_ids = (size_t)(step > 0 ? step : 1) * (size_t)B_local;
  int32_t *block = txl_malloc(block_ids * sizeof(int32_t), "window count block");
  int32_t *scratch = txl_malloc(block_ids * sizeof(int32_t), "window count block");
  int rc = 0;
  for (int64_t row = 1; row < col_len && rc == 0; row += step) {
    const int n = (int)(col_len - row < step ? col_len - row : step);
    rc = txl_corpus_read_block(c, split, col_len, col0, B_local, row, n, block, scratch, err, cap);
    if (rc == 0) txl_window_count_rows(&w, block, n);
  }
  if (rc == 0) txl_window_count_most(&w, most);
  free(block);
  free(scratch);
  txl_window_count_free(&w);
  return rc;
}
