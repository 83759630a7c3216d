#!/usr/bin/env bash
# Write, peek and read back on NP ranks: parameters, moments, this rank's memory columns, the
# state and the config text come back bit-identical (several model shapes, a second write over
# the first, no memory at all); buffers that do not describe one batch are refused everywhere.
#   roundtrip.sh TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR NP
. "$(dirname "$0")/lib.sh"
NP=$5
run_driver "round trip on $NP rank(s)" mpi "$NP" roundtrip "$WORK"
if [ "$NP" == 1 ]; then
  run_driver "txl_ckpt_latest" mpi 1 latest "$WORK"
fi
finish
