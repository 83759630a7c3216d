#!/usr/bin/env bash
# A crash in the middle of a write (TXL_CKPT_FAULT=after_params: every rank aborts after the
# parameters are written) leaves only "<path>.tmp": the final name is never created, an older
# checkpoint of the same name or another stays intact, and the next write succeeds.
#   crash.sh TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR
. "$(dirname "$0")/lib.sh"
for np in 1 2; do
  rm -f ck.h5* new.h5*
  run_driver "$np rank(s): write ck.h5 (step 4)" mpi "$np" write ck.h5 small 4
  out=$(TXL_CKPT_FAULT=after_params mpi "$np" write ck.h5 small 5 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then ok "$np rank(s): the writer of ck.h5 step 5 aborted (exit $rc)"; else fail "$np rank(s): the writer did not abort"; fi
  check "$np rank(s): ck.h5.tmp stays behind" test -f ck.h5.tmp
  run_driver "$np rank(s): ck.h5 still holds step 4, intact" mpi "$np" read ck.h5 small 4
  TXL_CKPT_FAULT=after_params mpi "$np" write new.h5 small 5 >/dev/null 2>&1
  absent "$np rank(s): a crashed first write of new.h5 creates no new.h5" new.h5
  run_driver "$np rank(s): ck.h5 intact after the second crash" mpi "$np" read ck.h5 small 4
  run_driver "$np rank(s): writing new.h5 again works" mpi "$np" write new.h5 small 5
  absent "$np rank(s): no new.h5.tmp left" new.h5.tmp
  run_driver "$np rank(s): new.h5 reads back" mpi "$np" read new.h5 small 5
done
finish
