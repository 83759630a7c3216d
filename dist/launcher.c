#include "dist/launcher.h"

#include <stdio.h>
#include <stdlib.h>

static int set(const char *name) {
  const char *v = getenv(name);
  return v && v[0];
}

TxlLauncher txl_launcher_detect(void) {
  /* mpirun first: inside a SLURM allocation its ranks inherit the batch step's SLURM_* */
  if (set("OMPI_MCA_orte_hnp_uri") || set("OMPI_MCA_orte_launch")) return TXL_LAUNCHER_MPIRUN;
  if (set("SLURM_STEP_ID") && set("SLURM_PROCID")) return TXL_LAUNCHER_SRUN;
  return TXL_LAUNCHER_NONE;
}

const char *txl_launcher_name(TxlLauncher l) {
  return l == TXL_LAUNCHER_MPIRUN ? "mpirun" : l == TXL_LAUNCHER_SRUN ? "srun" : "no launcher";
}

int txl_launcher_kill_timeout_s(TxlLauncher l) {
  if (l != TXL_LAUNCHER_MPIRUN) return -1;
  const char *v = getenv("OMPI_MCA_odls_base_sigkill_timeout");
  char *end;
  long s = v ? strtol(v, &end, 10) : 1;
  return v && (*end || s < 0) ? 1 : (int)s;
}

/* What a stop needs before the ranks may be killed: a step (up to STEP_S seconds, allowed for
 * large models on slow devices) and the checkpoint's write at DISK_BYTES_S, slower than the
 * slowest write seen on a busy 2-core machine (26 MiB/s). Only a checkpoint that already needs
 * more than Open MPI's default second at that rate is warned about. */
enum { STEP_S = 5 };
static int up(double s) { return (int)s + ((double)(int)s < s); }
static const double DISK_BYTES_S = 25.0 * 1048576.0;

int txl_launcher_stop_warning(TxlLauncher l, double ckpt_bytes, char *out, size_t n) {
  const int kill_s = txl_launcher_kill_timeout_s(l);
  const double write_s = ckpt_bytes / DISK_BYTES_S;
  if (l != TXL_LAUNCHER_MPIRUN || write_s <= 1.0) return 0;
  const int need = STEP_S + up(write_s);
  if (kill_s >= need) return 0;
  const int advise = need < 60 ? 60 : 10 * ((need + 9) / 10);
  snprintf(out, n,
           "warning: mpirun passes Ctrl-C and SIGTERM on to the ranks as SIGTERM and SIGKILLs them %d s later "
           "(odls_base_sigkill_timeout), too soon to finish a step and write this run's %.0f MiB checkpoint "
           "(about %d s at 25 MiB/s): stop the run with kill -USR1 <mpirun pid>, which mpirun passes on at once, or "
           "export OMPI_MCA_odls_base_sigkill_timeout=%d before mpirun (it then also waits about twice that after "
           "any rank's non-zero exit)", kill_s, ckpt_bytes / 1048576.0, up(write_s), advise);
  return 1;
}
