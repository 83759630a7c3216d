#!/usr/bin/env bash
# Installs what txl needs on Debian 12 / Ubuntu (root or sudo): compiler, CMake, Open MPI,
# parallel HDF5, OpenBLAS, SentencePiece (txl-prep --mode spm), PyTorch + h5py for the reference
# tests, matplotlib for the plots, SLURM + munge for tests/slurm (a private one-node SLURM; no daemon
# is configured or started here), and clang with its libFuzzer and sanitizer runtimes for
# scripts/fuzz.sh. Does nothing when all of it is present already.
set -euo pipefail
packages=(build-essential cmake libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools
          libopenblas-openmp-dev libsentencepiece-dev python3-torch python3-h5py python3-numpy python3-matplotlib
          slurmctld slurmd slurm-client munge clang libclang-rt-dev)
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
