/* txl-train --check: everything a run of P ranks would verify at start, in one process and
 * without allocating the run: the config for P ranks and run.device, the corpus header when the
 * corpus is here (else data.n_token stands for it), the model's shape, and the memory per rank. */
#ifndef TXL_TRAIN_CHECK_H
#define TXL_TRAIN_CHECK_H

#include "src/config/config.h"

/* Prints what it found and returns when a run of `ranks` ranks can start; a problem ends the
 * process with one line (exit 1). config_path names the config in messages. */
void txl_check_run(const TxlConfig *cfg, const char *config_path, int ranks);

#endif
