#!/usr/bin/env bash
# Configures and builds txl into build/ (or $TXL_BUILD). Extra arguments go to cmake.
set -euo pipefail
source "$(dirname "$0")/env.sh"
cmake -S "$TXL_ROOT" -B "$TXL_BUILD" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$TXL_BUILD" -j "$TXL_JOBS"
