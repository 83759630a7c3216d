#!/usr/bin/env bash
# A write that runs into a file-size limit (as a full disk: the file system refuses to grow the
# file, EFBIG; SIGXFSZ ignored) fails with -1 on every rank and one message naming the file, and
# leaves no final file, no .tmp, and the earlier checkpoint of that name intact.
# The limits: `ulimit -f` in this script (half the file: Open MPI starts under it), and small ones
# set by the driver itself after MPI_Init (CKPT_TEST_FSIZE_KB), because Open MPI's start-up
# files are subject to a limit set before mpirun.
#   disk_full.sh TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR
. "$(dirname "$0")/lib.sh"
# ulimited KIB NP ARGS...: the driver on NP ranks, mpirun under `ulimit -f KIB`
ulimited() {
  local kb=$1
  shift
  (trap '' XFSZ; ulimit -f "$kb" && mpi "$@")
}
# limited KIB NP ARGS...: the driver on NP ranks, each limiting itself to KIB after MPI_Init
limited() {
  local kb=$1
  shift
  (trap '' XFSZ; CKPT_TEST_FSIZE_KB=$kb mpi "$@")
}
run_driver "write big.h5 (step 4) without a limit" mpi 2 write big.h5 big 4
size=$(stat -c %s big.h5)
for np in 1 2; do
  for how in "ulimited $((size / 1024 / 2))" "limited 64" "limited $((size / 1024 / 10))" "limited $((size / 1024))"; do
    run_driver "$np rank(s), $how KiB: the write fails" $how "$np" write-fail big.h5 big 5 "big.h5|File too large"
    absent "$np rank(s), $how KiB: no .tmp left" big.h5.tmp
    run_driver "$np rank(s), $how KiB: big.h5 still holds step 4" mpi "$np" read big.h5 big 4
    run_driver "$np rank(s), $how KiB: a new file fails too" $how "$np" write-fail full.h5 big 5 "full.h5|File too large"
    absent "$np rank(s), $how KiB: neither full.h5 nor full.h5.tmp" full.h5 full.h5.tmp
  done
done
run_driver "a limit above the file: the write works" limited $((size / 1024 + 4096)) 2 write big.h5 big 5
run_driver "big.h5 now holds step 5" mpi 2 read big.h5 big 5
absent "no .tmp left" big.h5.tmp
finish
