#!/usr/bin/env bash
# Installs the Debian 12 / Ubuntu packages txl needs (root or sudo), by group:
#   run     (always)  building and running txl: compiler, CMake, Open MPI, parallel HDF5 and its
#                     tools, OpenBLAS, SentencePiece (txl-prep --mode spm)
#   python            the txl Python package (python/: txl.load, txl-export): PyTorch, h5py, NumPy
#   plot              scripts/plot-metrics.py: matplotlib
#   slurm             tests/slurm's private one-node SLURM (no daemon is configured or started here)
#   fuzz              scripts/fuzz.sh: clang with its libFuzzer and sanitizer runtimes
#   test              everything scripts/test.sh runs: all of the above, and venv + pip for the
#                     Python packages the tests install into a folder of the build (test.sh)
# Usage: scripts/install-deps.sh [--with GROUP]... [--list]
# Does nothing when all of it is present already.
set -euo pipefail
declare -A group=(
  [run]="build-essential cmake libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools libopenblas-openmp-dev libsentencepiece-dev"
  [python]="python3-torch python3-h5py python3-numpy"
  [plot]="python3-matplotlib"
  [slurm]="slurmctld slurmd slurm-client munge"
  [fuzz]="clang libclang-rt-dev"
  [test]="python3-venv python3-pip"
)
order=(run python plot slurm fuzz test)
usage() {
  echo "usage: scripts/install-deps.sh [--with GROUP]... [--list]   (groups: ${order[*]}; run is always installed)"
}
want=(run)
while [ $# -gt 0 ]; do
  case $1 in
    --with)
      [ $# -ge 2 ] || { usage >&2; exit 2; }
      [ -n "${group[$2]+x}" ] || { echo "install-deps: no group '$2' (groups: ${order[*]})" >&2; exit 2; }
      if [ "$2" = test ]; then want+=("${order[@]}"); else want+=("$2"); fi
      shift 2 ;;
    --list)
      for g in "${order[@]}"; do printf '%-7s %s\n' "$g" "${group[$g]}"; done
      exit 0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-deps: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
packages=()
for g in "${order[@]}"; do
  for w in "${want[@]}"; do
    if [ "$w" = "$g" ]; then read -r -a p <<< "${group[$g]}"; packages+=("${p[@]}"); break; fi
  done
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
