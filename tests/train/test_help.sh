#!/usr/bin/env bash
# txl-train --help names every key of src/config/config.def.
source "$(dirname "$0")/lib.sh" "$1" "$2"
"$BIN/txl-train" --help > "$WORK/help.txt"
keys=$(sed -n 's/^X([a-z]*, *\([a-z_0-9]*\),.*/\1/p' "$SRC/src/config/config.def")
[ -n "$keys" ] || fail "no keys parsed from config.def"
for k in $keys; do
  if grep -Eq "^ +$k +(int|float|bool|string|enum) " "$WORK/help.txt"; then ok "--help lists $k"; else fail "--help lacks $k"; fi
done
# ranges as config.def writes them (0.999999999 printed with %g was "1", 1e30 "1e+30")
ranges=$(sed -n 's/^X([a-z]*, *\([a-z_0-9]*\), *\(INT\|FLOAT\), *"[^"]*", *\([^,]*\), *\([^,]*\),.*/\1 \3 \4/p' \
  "$SRC/src/config/config.def")
[ -n "$ranges" ] || fail "no ranges parsed from config.def"
while read -r k lo hi; do
  if grep -E "^ +$k +(int|float) " "$WORK/help.txt" | grep -qF " range [$lo, $hi]"; then
    ok "--help: $k range [$lo, $hi]"
  else
    fail "--help: $k: $(grep -E "^ +$k " "$WORK/help.txt"), config.def [$lo, $hi]"
  fi
done <<< "$ranges"
# the keys a resumed run must keep (FIXED in config.def) are marked, and only they
while read -r k resume; do
  line=$(grep -E "^ +$k +(int|float|bool|string|enum) " "$WORK/help.txt")
  marked=no; case "$line" in *", fixed on resume"*) marked=yes ;; esac
  if [ "$resume:$marked" = FIXED:yes ] || [ "$resume:$marked" = FREE:no ]; then
    ok "--help: $k $resume"
  else
    fail "--help: $k is $resume in config.def, marked fixed on resume: $marked"
  fi
done < <(sed -n 's/^X([a-z]*, *\([a-z_0-9]*\),.*, *\(FIXED\|FREE\), *".*/\1 \2/p' "$SRC/src/config/config.def")
# every shipped config is valid (checked without a corpus: --print-config validates and exits)
for cfg in "$SRC"/configs/*.ini "$SRC"/configs/bench/*.ini "$SRC"/configs/ablation/*.ini; do
  if "$BIN/txl-train" "$cfg" --print-config > /dev/null 2> "$WORK/err.txt"; then
    ok "config $(basename "$cfg") is valid"
  else
    fail "config $(basename "$cfg"): $(cat "$WORK/err.txt")"
  fi
done
finish
