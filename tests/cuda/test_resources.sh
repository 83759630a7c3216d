#!/usr/bin/env bash
# The limits of the compiled kernels, which the CPU emulator cannot see (kernels/emu/README.md,
# "What it cannot check"): every kernels/cuda/*.cu compiled to a cubin for each architecture of
# the build, with ptxas's report (-Xptxas -v), and for every kernel (entry function):
#   registers per thread <= 255, and registers per block <= the architecture's 64 K, at the
#     largest block size any launch in kernels/cuda uses (the allocation rounded as the GPU does:
#     8 registers per thread, whole warps);
#   no spill stores or loads (registers spilled to local memory: slow, and a sign the kernel
#     needs more than it may have);
#   static __shared__ memory <= 48 KiB.
# The block size is read from the TXL_LAUNCH sites: each one's block argument must be a number or
# a #define'd constant of kernels/cuda (TXL_CUDA_THREADS, ...). A kernel is checked at
# TXL_CUDA_THREADS unless the table BLOCKS below names it with more; a launch with more threads
# than its kernel's figure fails (list the kernel there, or launch it through its own name: a
# launch through a pointer, "auto k = ...", names "k"). The flags are the Release build's device flags (-std=c++17 -O3 -DNDEBUG, the checkout as
# include directory), whatever the build type: the check is about the kernels as shipped.
# Needs nvcc (ptxas), no GPU. Compiles 2 at a time (TXL_RESOURCE_JOBS overrides).
#   test_resources.sh SOURCE_DIR NVCC ARCHS   ARCHS: CMake's CUDA_ARCHITECTURES list, separated
#                                             by ';' or ',': 75-real,80-real,86-real,89-real,90
set -uo pipefail
src=$1
nvcc=$2
archs=$3
jobs=${TXL_RESOURCE_JOBS:-2}
source "$src/tests/lib/checks.sh"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
dir=$src/kernels/cuda
start=$SECONDS

# --- the architectures: "75-real;90" -> 75 90 (the -real/-virtual suffix does not matter here)
sms=()
IFS=';,' read -r -a entries <<< "$archs"
for a in "${entries[@]}"; do
  a=${a%-real}
  a=${a%-virtual}
  if [[ $a =~ ^[0-9]+[a-z]?$ ]]; then sms+=("$a"); else echo "note: '$a' names no architecture here, not checked"; fi
done
if [ ${#sms[@]} -eq 0 ]; then
  echo "SKIPPED: no numbered architecture in '$archs'"
  exit 77
fi
# registers per block of each architecture (CUDA Programming Guide, compute capabilities table)
regs_per_block() {
  case ${1%[a-z]} in
    75 | 80 | 86 | 87 | 89 | 90 | 100 | 101 | 103 | 110 | 120 | 121) echo 65536 ;;
    *) echo "" ;;
  esac
}
MAX_REGS=255
MAX_SMEM=$((48 * 1024))

# --- the largest block size of any launch
# a constant's value: a number, or a "#define NAME VALUE" of kernels/cuda, followed to a number
resolve() {
  local v=$1 n=0
  while ! [[ $v =~ ^[0-9]+$ ]]; do
    [[ $v =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && [ $n -lt 8 ] || return 1
    v=$(sed -n "s/^[[:space:]]*#define[[:space:]]\+${v}[[:space:]]\+\([A-Za-z0-9_]\+\).*/\1/p" "$dir"/*.cu "$dir"/*.h | head -n 1)
    [ -n "$v" ] || return 1
    n=$((n + 1))
  done
  echo "$v"
}
# every TXL_LAUNCH(kernel, grid, block, shared) of the .cu and .h files, outside comments and the
# macro's own #define: FILE<TAB>kernel (the first argument)<TAB>block (the third, at parenthesis
# depth 0)
awk '
  FNR == 1 { nf++; file[nf] = FILENAME; text[nf] = "" }
  /^[[:space:]]*(\*|\/\*|\/\/|#[[:space:]]*define)/ { next }
  { text[nf] = text[nf] $0 " " }
  END {
    for (f = 1; f <= nf; f++) {
      t = text[f]
      while ((i = index(t, "TXL_LAUNCH(")) > 0) {
        t = substr(t, i + 11)
        depth = 0; arg = 0; cur = ""; kern = ""
        for (j = 1; j <= length(t); j++) {
          c = substr(t, j, 1)
          if (c == "(") depth++
          else if (c == ")") { if (depth == 0) break; depth-- }
          else if (c == "," && depth == 0) { arg++; if (arg == 1) kern = cur; if (arg == 3) break; cur = ""; continue }
          cur = cur c
        }
        gsub(/[[:space:]]+/, "", cur)
        gsub(/[[:space:]]+/, "", kern)
        sub(/<.*/, "", kern)
        print file[f] "\t" kern "\t" cur
      }
    }
  }' "$dir"/*.cu "$dir"/*.h > "$WORK/launches.txt"
# kernels launched with more threads than TXL_CUDA_THREADS: BLOCKS[name]=threads (none today)
declare -A BLOCKS=()
default=$(resolve TXL_CUDA_THREADS) || { fail "no #define TXL_CUDA_THREADS in $dir"; finish; }
threads_of() { echo "${BLOCKS[$1]:-$default}"; } # the largest block kernel $1 is launched with
nlaunch=0
bad_launch=0
while IFS=$'\t' read -r file kern arg; do
  nlaunch=$((nlaunch + 1))
  if ! v=$(resolve "$arg"); then
    fail "$(basename "$file"): $kern launched with block size '$arg', not a number or #define'd constant: this test cannot bound its registers per block"
    bad_launch=1
  elif [ "$v" -gt "$(threads_of "$kern")" ]; then
    fail "$(basename "$file"): $kern launched with $v threads, more than its $(threads_of "$kern") here: give it BLOCKS[$kern]=$v in this script"
    bad_launch=1
  fi
done < "$WORK/launches.txt"
if [ $nlaunch -eq 0 ]; then
  fail "no TXL_LAUNCH found in $dir"
elif [ $bad_launch -eq 0 ]; then
  ok "$nlaunch launches in kernels/cuda, blocks of $(cut -f3 "$WORK/launches.txt" | sort -u | paste -sd ' '): none over $default threads but those of BLOCKS (${#BLOCKS[@]})"
fi

# --- compile: one cubin per (architecture, file), 2 at a time
for sm in "${sms[@]}"; do
  mkdir -p "$WORK/sm_$sm"
  for f in "$dir"/*.cu; do printf '%s %s\n' "$sm" "$f"; done
done > "$WORK/jobs.txt"
export nvcc src WORK
xargs -P "$jobs" -L 1 sh -c '
  out=$WORK/sm_$0/$(basename "$1" .cu)
  "$nvcc" -std=c++17 -O3 -DNDEBUG -I"$src" -cubin -arch=sm_$0 -Xptxas -v "$1" -o "$out.cubin" > "$out.log" 2>&1 \
    || echo "$0 $1" >> "$WORK/failed.txt"' < "$WORK/jobs.txt"
compile_s=$((SECONDS - start))
if [ -s "$WORK/failed.txt" ]; then
  while read -r sm f; do
    fail "nvcc -arch=sm_$sm $(basename "$f") failed"
    sed 's/^/     | /' "$WORK/sm_$sm/$(basename "$f" .cu).log" | head -n 20
  done < "$WORK/failed.txt"
else
  cus=("$dir"/*.cu)
  ok "$(wc -l < "$WORK/jobs.txt") compiles (${#cus[@]} files x ${#sms[@]} architectures) in ${compile_s} s, $jobs at a time"
fi

# --- ptxas's report: one row per function: arch, mangled name, registers, spill stores, spill
# loads, stack frame, static shared memory (a function without a "Used" line, a callee, has "-"
# registers)
for sm in "${sms[@]}"; do
  cat "$WORK/sm_$sm"/*.log | awk -v arch="sm_$sm" -v q="'" '
    function flush() { if (name != "") print arch "\t" name "\t" regs "\t" st "\t" ld "\t" stack "\t" smem; name = "" }
    /Compiling entry function|Function properties for/ {
      n = $0
      if (n ~ /Compiling entry function/) { split(n, part, q); n = part[2] }
      else sub(/.*Function properties for /, "", n)
      if (n != name) { flush(); name = n; regs = "-"; st = 0; ld = 0; stack = 0; smem = 0 }
      next
    }
    /bytes stack frame/ {
      match($0, /[0-9]+ bytes stack frame/); stack = substr($0, RSTART, RLENGTH) + 0
      match($0, /[0-9]+ bytes spill stores/); st = substr($0, RSTART, RLENGTH) + 0
      match($0, /[0-9]+ bytes spill loads/); ld = substr($0, RSTART, RLENGTH) + 0
      next
    }
    /Used [0-9]+ registers/ {
      match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15) + 0
      if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH) + 0
      next
    }
    END { flush() }'
done > "$WORK/report.tsv"
# readable names where c++filt exists: the parameter list, "void " and the anonymous namespace
# dropped (softmax_forward_kernel<float>)
if command -v c++filt > /dev/null; then
  cut -f2 "$WORK/report.tsv" | c++filt | sed -e 's/^void //' -e 's/(anonymous namespace):://g' \
    -e 's/(.*)$//' > "$WORK/names.txt"
else
  cut -f2 "$WORK/report.tsv" > "$WORK/names.txt"
fi

# --- the checks, and the table
printf '%-6s %-62s %5s %11s %6s %6s  %s\n' arch kernel regs spills stack smem verdict
nk=0
ncallee=0
nbad=0
maxblock=0
declare -A per_arch
while IFS=$'\t' read -r arch mangled regs st ld stack smem <&3 && read -r name <&4; do
  why=""
  if [ "$regs" != "-" ]; then
    nk=$((nk + 1))
    per_arch[$arch]=$((${per_arch[$arch]:-0} + 1))
    limit=$(regs_per_block "${arch#sm_}")
    threads=$(threads_of "${name%%<*}")
    block=$(((regs + 7) / 8 * 8 * ((threads + 31) / 32 * 32)))
    [ "$block" -gt "$maxblock" ] && maxblock=$block
    [ "$regs" -le $MAX_REGS ] || why="$why; $regs registers per thread > $MAX_REGS"
    if [ -z "$limit" ]; then
      why="$why; no registers-per-block limit known for $arch (add it to regs_per_block)"
    elif [ "$block" -gt "$limit" ]; then
      why="$why; $block registers per block of $threads threads > $limit"
    fi
    [ "$smem" -le $MAX_SMEM ] || why="$why; $smem bytes of static shared memory > $MAX_SMEM"
  else
    ncallee=$((ncallee + 1))
  fi
  [ "$st" -eq 0 ] && [ "$ld" -eq 0 ] || why="$why; spills $st bytes stored, $ld bytes loaded"
  verdict=ok
  if [ -n "$why" ]; then
    verdict="FAIL${why#;}"
    nbad=$((nbad + 1))
  fi
  printf '%-6s %-62s %5s %5s/%-5s %6s %6s  %s\n' "$arch" "$name" "$regs" "$st" "$ld" "$stack" "$smem" "$verdict"
  [ -n "$why" ] && fail "$arch $name ($mangled):${why#;}"
done 3< "$WORK/report.tsv" 4< "$WORK/names.txt"
# every architecture has the same kernels, and some
counts=$(for sm in "${sms[@]}"; do echo "${per_arch[sm_$sm]:-0}"; done | sort -u)
if [ "$nk" -eq 0 ] || [ "$(wc -l <<< "$counts")" -ne 1 ]; then
  fail "kernels found per architecture: $(for sm in "${sms[@]}"; do printf 'sm_%s %s, ' "$sm" "${per_arch[sm_$sm]:-0}"; done)"
fi
maxregs=$(awk -F'\t' '$3 != "-" && $3 > m { m = $3 } END { print m + 0 }' "$WORK/report.tsv")
summary="$nk kernels (and $ncallee callees' frames) on ${#sms[@]} architectures ($(printf 'sm_%s ' "${sms[@]}" | sed 's/ $//')): $nbad over a limit; most registers $maxregs per thread"
summary="$summary, most per block $maxblock (limit 65536), ${compile_s} s to compile"
[ $nbad -eq 0 ] && [ "$nk" -gt 0 ] && ok "$summary" || fail "$summary"
echo "total ${SECONDS} s"
finish
