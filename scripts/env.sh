# Sourced by the scripts: settings every mpirun here needs.
# Open MPI refuses to start as root unless told that it is wanted (containers, CI).
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Ranks may share a small machine: let mpirun place more ranks than cores when asked.
export OMPI_MCA_rmaps_base_oversubscribe=1
TXL_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TXL_BUILD=${TXL_BUILD:-$TXL_ROOT/build}
TXL_JOBS=${TXL_JOBS:-$(nproc)}
