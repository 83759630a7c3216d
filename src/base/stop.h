/* Stop requests: SIGINT (Ctrl-C), SIGTERM (kill, timeout, scancel, mpirun passing either on) and
 * SIGUSR1 (SLURM's warning before the time limit, forwarded by mpirun and srun as it is) ask a
 * training run to finish its step, write a checkpoint and exit with TXL_STOP_EXIT (75, EX_TEMPFAIL:
 * SLURM's requeue status). The handlers only record the request; the training loop reads it
 * between steps (txl_stop_requested) and the ranks agree on it in their per-step collective.
 *
 * Installed first thing in main, before MPI starts or anything is set up, so that a request made
 * during the start-up (80 ms after launch, during a corpus scan) is kept, not fatal. A second
 * Ctrl-C aborts at once (the process ends by SIGINT); everything the run writes is replaced
 * atomically (a temporary, then rename), so the previous checkpoint and `latest` stay intact. A
 * repeated SIGTERM or SIGUSR1 is not an abort: launchers send them twice (scancel signals every
 * process of the job, and mpirun passes SIGTERM on again). Async-signal-safe only: no stdio. */
#ifndef TXL_BASE_STOP_H
#define TXL_BASE_STOP_H

/* Exit status of a run stopped by a request after its checkpoint was written. */
#define TXL_STOP_EXIT 75

/* Installs the handlers of SIGINT, SIGTERM and SIGUSR1 (process-wide; call once, first). */
void txl_stop_install(void);
/* Which rank this is: only rank 0 prints the line that acknowledges a request (every rank of an
 * mpirun job receives it). Before it is called every process prints. */
void txl_stop_set_rank(int rank);
/* The signal of the first request (SIGINT, SIGTERM or SIGUSR1), or 0 without one. */
int txl_stop_requested(void);
/* Its name: "SIGINT", "SIGTERM", "SIGUSR1", or "signal N". */
const char *txl_stop_signal_name(int sig);
/* For the work after the last checkpoint (the final evaluations of a finished run): a request
 * then ends the process at once with TXL_STOP_EXIT and the line `saved` (a finished state is
 * written; nothing is lost), also when it came before this call. */
void txl_stop_exit_on_request(const char *saved);
/* Gives the three signals their default action back (a tool mode with no checkpoint to write:
 * --bench, --check, --print-config); a request received before then takes effect now. */
void txl_stop_uninstall(void);

#endif
