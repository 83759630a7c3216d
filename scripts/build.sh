#!/usr/bin/env bash
# Configures and builds txl into build/ (or $TXL_BUILD). Extra arguments go to cmake.
# TXL_TARGETS="T..." builds only those targets (txl-tools: the five tools, no tests).
# TXL_PREBUILT=1: build nothing, use $TXL_BUILD as it is (a node with the runtime libraries but no
# compilers or headers, given a build made elsewhere); it must hold bin/txl-train.
set -euo pipefail
source "$(dirname "$0")/env.sh"
if [ "${TXL_PREBUILT:-0}" = 1 ]; then
  [ -x "$TXL_BUILD/bin/txl-train" ] || { echo "build.sh: TXL_PREBUILT=1 but $TXL_BUILD/bin/txl-train is missing"; exit 1; }
  exit 0
fi
cmake -S "$TXL_ROOT" -B "$TXL_BUILD" -DCMAKE_BUILD_TYPE=Release "$@"
read -r -a targets <<< "${TXL_TARGETS:-}"
cmake --build "$TXL_BUILD" -j "$TXL_JOBS" ${targets[@]+--target "${targets[@]}"}
