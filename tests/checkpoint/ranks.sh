#!/usr/bin/env bash
# A checkpoint written by one rank count is read by others with the same batch: every rank gets
# its own columns of the memory (stored by global column) and the same parameters.
#   ranks.sh TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR
. "$(dirname "$0")/lib.sh"
run_driver "write small with 2 ranks" mpi 2 write w2.h5 small 3
for np in 1 2 4; do
  run_driver "2-rank file read by $np rank(s)" mpi "$np" read w2.h5 small 3 2
done
run_driver "write big with 4 ranks" mpi 4 write w4.h5 big 5
for np in 1 2; do
  run_driver "4-rank file read by $np rank(s)" mpi "$np" read w4.h5 big 5 4
done
run_driver "write small with 1 rank" mpi 1 write w1.h5 small 6
run_driver "1-rank file read by 4 ranks" mpi 4 read w1.h5 small 6 1
run_driver "another batch size is refused" mpi 2 read-fail w2.h5 batch8 3 "batch_size 4|this run has 8"
finish
