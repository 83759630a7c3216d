#!/usr/bin/env bash
# Every line a user copies from README.md or docs/*.md names what exists: each configs/ file, each scripts/
# program (executable) and slurm/ batch script, each txl tool (built; or a console script of the Python
# package, python/pyproject.toml), each option of a tool (in that tool's --help), each key a --set sets
# (in txl-train --help's list of keys); and the lines that need no corpus and no run (--check, --help)
# are run as written, from the source folder, and succeed; and the list of CUDA-graph rules in
# docs/gpu.md is the one txl-train --help ends with.
#   test_readme.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/lib/checks.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/txl-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# README.md and the docs/ it points to
for f in README.md $(cd "$SRC" && ls docs/*.md); do
  python3 "$SRC/tests/docs/readme_lines.py" "$SRC/$f" | sed "s|^|$f\t|"
done > "$WORK/lines.tsv"
# the keys of txl-train --help: "  [section]" headers, then "    key   type ..." lines
"$BIN/txl-train" --help | awk '/^  \[[a-z]+\]$/ { s = substr($1, 2, length($1) - 2) }
                               /^    [a-z_0-9]+ +[a-z]/ && s { print s "." $1 }' > "$WORK/keys.txt"
[ "$(wc -l < "$WORK/keys.txt")" -gt 50 ] && ok "txl-train --help lists $(wc -l < "$WORK/keys.txt") keys" \
  || { fail "no key list in txl-train --help"; finish; }
# a build without the CUDA backend cannot check a run.device = cuda line (it says so in one line)
cuda=1
"$BIN/txl-train" "$SRC/configs/bench/tiny.ini" --check --set run.device=cuda > /dev/null 2>&1 || cuda=0
declare -A counted=()
# the Python package's console scripts (python/pyproject.toml's [project.scripts], e.g. txl-export):
# name -> module; their --help comes from the package in the clone, run by the tests' Python
declare -A pytool=()
while read -r name mod; do pytool[$name]=$mod; done \
  < <(sed -n 's/^\(txl-[a-z]*\) = "\([a-z_.]*\):[a-z_]*"$/\1 \2/p' "$SRC/python/pyproject.toml")
[ ${#pytool[@]} -gt 0 ] || fail "python/pyproject.toml declares no txl-* console script"
PY=${TXL_PYTHON:-/usr/bin/python3}
tool_help() {  # TOOL -> $WORK/TOOL.help (empty when its --help does not run)
  if [ -n "${pytool[$1]:-}" ]; then
    PYTHONPATH="$SRC/python" "$PY" -m "${pytool[$1]}" --help > "$WORK/$1.help" 2> /dev/null || : > "$WORK/$1.help"
  else
    "$BIN/$1" --help > "$WORK/$1.help" 2>&1 || true
  fi
}
count() { counted[$1]=$(( ${counted[$1]:-0} + 1 )); }
while IFS=$'\t' read -r file kind n a b rest; do
  case $kind in
    CONFIG) [ -f "$SRC/$a" ] && count configs || fail "$file line $n: $a does not exist" ;;
    SCRIPT) # scripts/ run as commands; sbatch reads slurm/'s
      if [[ $a == slurm/* ]]; then [ -f "$SRC/$a" ]; else [ -x "$SRC/$a" ]; fi && count programs \
        || fail "$file line $n: $a does not exist (or, in scripts/, is not executable)" ;;
    TOOL) if [ -n "${pytool[$a]:-}" ]; then
            [ -f "$SRC/python/${pytool[$a]//.//}.py" ] && count tools \
              || fail "$file line $n: $a: python/pyproject.toml's module ${pytool[$a]} does not exist"
          else
            [ -x "$BIN/$a" ] && count tools || fail "$file line $n: $a is not built"
          fi ;;
    OPTION)
      [ -f "$WORK/$a.help" ] || tool_help "$a"
      if [ ! -s "$WORK/$a.help" ]; then
        echo "not run here: $file line $n: $a --help does not run for $PY (the txl package needs torch, h5py, numpy)"
      else
        grep -Eq -- "(^|[ ,])$(re_quote "$b")([ ,=]|$)" "$WORK/$a.help" && count options \
          || fail "$file line $n: $a has no option $b (not in $a --help)"
      fi ;;
    KEY) grep -qx -- "$a" "$WORK/keys.txt" && count keys || fail "$file line $n: --set $a: no such key" ;;
    RUN)
      args=("$b")
      [ -n "$rest" ] && IFS=$'\t' read -r -a more <<< "$rest" && args+=("${more[@]}")
      if [ $cuda = 0 ] && [[ " ${args[*]} " == *" run.device=cuda "* ]]; then
        echo "not run here: $file line $n: this build has no CUDA backend to check $a ${args[*]}"
      elif (cd "$SRC" && timeout 60 "$BIN/$a" "${args[@]}") > "$WORK/run.out" 2>&1; then
        if [[ " ${args[*]} " == *" --check "* ]] && ! grep -q "^check passed" "$WORK/run.out"; then
          fail "$file line $n: $a ${args[*]}: no 'check passed' line"
        else
          ok "$file line $n runs as written: $a ${args[*]}"
        fi
      else
        fail "$file line $n: $a ${args[*]} failed: $(grep -v '^ ' "$WORK/run.out" | tail -2)"
      fi ;;
    BAD) fail "$file line $n does not split into words: $a" ;;
  esac
done < "$WORK/lines.tsv"
# the rules of run.cuda_graph (src/train/graph_step.c), as txl-train --help lists them at its end, are the list
# of docs/gpu.md after its words "A run does not qualify where", one "- REASON" line each, in the same order
"$BIN/txl-train" --help | sed -n '/^CUDA graphs (run.cuda_graph)/,$ s/^  - //p' > "$WORK/graph_rules.txt"
awk '/A run does not qualify where/ { on = 1; next } on && /^- / { print substr($0, 3); seen = 1; next }
     on && seen && !/^- / { exit }' "$SRC/docs/gpu.md" > "$WORK/graph_rules_doc.txt"
if [ ! -s "$WORK/graph_rules.txt" ]; then
  fail "txl-train --help lists no CUDA-graph rule"
elif diff "$WORK/graph_rules.txt" "$WORK/graph_rules_doc.txt" > "$WORK/graph_rules.diff"; then
  ok "docs/gpu.md lists the $(wc -l < "$WORK/graph_rules.txt") CUDA-graph rules of txl-train --help"
else
  fail "docs/gpu.md's CUDA-graph rules differ from txl-train --help's (< --help, > the doc): $(tr '\n' ' ' < "$WORK/graph_rules.diff")"
fi
# README.md names every package of every group of scripts/install-deps.sh, each group by its flag
while read -r g pkgs; do
  missing=""
  for p in $pkgs; do grep -Eq -- "(^|[ \`])$(re_quote "$p")([ \`]|$)" "$SRC/README.md" || missing+=" $p"; done
  flagged=1
  [ "$g" = run ] || grep -q -- "--with $g" "$SRC/README.md" || flagged=0
  [ -z "$missing" ] && [ $flagged = 1 ] && ok "README.md names install-deps.sh's group $g and its packages" \
    || fail "README.md: install-deps.sh's group $g:${missing:+ packages not named:$missing}$([ $flagged = 1 ] || echo " (no --with $g)")"
done < <("$SRC/scripts/install-deps.sh" --list)
for what in configs programs tools options keys; do
  [ "${counted[$what]:-0}" -gt 0 ] && ok "${counted[$what]} $what named by the example lines exist" \
    || fail "no $what found in the example lines (the parser missed them)"
done
finish
