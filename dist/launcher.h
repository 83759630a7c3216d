/* What started this process's ranks, read from the environment each launcher sets: Open MPI's
 * mpirun (its daemons set OMPI_MCA_orte_hnp_uri), SLURM's srun (SLURM_STEP_ID and SLURM_PROCID
 * for every task of a step), or nothing (one process started by hand). Messages that advise a
 * command name the launcher in use; the stop advice tells how that launcher passes signals on.
 * Pure functions of the environment: no MPI. */
#ifndef TXL_DIST_LAUNCHER_H
#define TXL_DIST_LAUNCHER_H

#include <stddef.h>

typedef enum { TXL_LAUNCHER_NONE, TXL_LAUNCHER_MPIRUN, TXL_LAUNCHER_SRUN } TxlLauncher;

TxlLauncher txl_launcher_detect(void);
/* "mpirun", "srun", or "no launcher" */
const char *txl_launcher_name(TxlLauncher l);

/* Seconds mpirun waits after it passes a Ctrl-C or SIGTERM on as SIGTERM before it SIGKILLs the
 * ranks: its odls_base_sigkill_timeout, as mpirun hands it to the ranks in the environment
 * (OMPI_MCA_odls_base_sigkill_timeout, set by the user's environment or --mca); 1, Open MPI's
 * default, without it. Not known (-1) under another launcher. */
int txl_launcher_kill_timeout_s(TxlLauncher l);

/* When a stop through this launcher would kill the ranks before a step and a checkpoint of
 * ckpt_bytes are written (mpirun with too short a kill timeout), a one-line warning (no newline)
 * into out and 1; else 0. */
int txl_launcher_stop_warning(TxlLauncher l, double ckpt_bytes, char *out, size_t n);

#endif
