#!/usr/bin/env bash
# txl-inspect: a good file prints the state and every tensor; --verify reads every dataset; a bad
# file is one "txl: error: FILE: ..." line and exit status 1.
#   inspect.sh TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR
. "$(dirname "$0")/lib.sh"
run_driver "write good.h5 with 2 ranks" mpi 2 write good.h5 small 4
out=$("$INSPECT" good.h5 2>&1)
rc=$?
if [ $rc -eq 0 ]; then ok "txl-inspect good.h5 exits 0"; else fail "txl-inspect good.h5 exit $rc: $out"; fi
for want in "format          txl-checkpoint, version 2" "run id          0123456789abcdef0000000000000004" \
            "vocab digest    0000000000000000000000000000000000000000000000000000000000000032" \
            "step            4" "tokens seen     4000019" "written by      2 ranks" \
            "batch size      4 columns" "memory          mem_len 5, valid rows 4" \
            "n_layer = 2" "/params/word_emb" "/params/layers.1.w_ff2" "/adam_m/layers.0.w_qkv" \
            "/adam_v/out_bias" "/mems " "[2, 5, 4, 16]" "total "; do
  case "$out" in *"$want"*) ok "output holds '$want'" ;; *) fail "output lacks '$want'"; echo "$out" | sed 's/^/     | /' ;; esac
done
out=$("$INSPECT" --verify good.h5 2>&1)
case "$out" in *"every checksum matches"*) ok "--verify on a good file" ;; *) fail "--verify: $out" ;; esac
check "--help" "$INSPECT" --help
# a version 1 file: its own version, no run id, no digest
cp good.h5 v1.h5 && "$TOOL" set-attr v1.h5 format_version 1
out=$("$INSPECT" v1.h5 2>&1)
for want in "format          txl-checkpoint, version 1" "run id          none (a version 1 file)" \
            "vocab digest    none (a version 1 file)"; do
  case "$out" in *"$want"*) ok "version 1 file: output holds '$want'" ;; *) fail "version 1 file: output lacks '$want'"; echo "$out" | head -5 | sed 's/^/     | /' ;; esac
done
# --verify reads every value: NaN, an infinity, a negative second moment are errors; NaN past the
# valid rows of /mems (element 256: layer 0, row 4 of mem_rows 4) is not
cp good.h5 nan.h5 && "$TOOL" poke nan.h5 /params/layers.1.w_qkv 9 nan
expect_error "--verify: NaN in a parameter" 'nan\.h5' "dataset '/params/layers\.1\.w_qkv' holds NaN at element 9" 'unusable' -- "$INSPECT" --verify nan.h5
cp good.h5 inf.h5 && "$TOOL" poke inf.h5 /adam_m/word_emb 700 inf
expect_error "--verify: +Inf in adam_m" 'inf\.h5' "dataset '/adam_m/word_emb' holds \+Inf at element 700" -- "$INSPECT" --verify inf.h5
cp good.h5 negv.h5 && "$TOOL" poke negv.h5 /adam_v/layers.0.ln1_w 2 -3
expect_error "--verify: a negative second moment" 'negv\.h5' "dataset '/adam_v/layers\.0\.ln1_w' holds -3 at element 2, a negative second moment" -- "$INSPECT" --verify negv.h5
cp good.h5 mem.h5 && "$TOOL" poke mem.h5 /mems 562 -inf
expect_error "--verify: -Inf in a valid memory row" 'mem\.h5' "dataset '/mems' holds -Inf at element 562" -- "$INSPECT" --verify mem.h5
cp good.h5 mem_past.h5 && "$TOOL" poke mem_past.h5 /mems 256 nan
out=$("$INSPECT" --verify mem_past.h5 2>&1)
case "$out" in *"every checksum matches"*) ok "--verify: NaN past the valid memory rows is no error" ;; *) fail "--verify mem_past.h5: $(echo "$out" | tail -1)" ;; esac

echo "some text" > text.h5
expect_error "a text file" 'text\.h5' 'not an HDF5 file' -- "$INSPECT" text.h5
expect_error "a missing file" 'missing\.h5' 'No such file' -- "$INSPECT" missing.h5
cp good.h5 v3.h5 && "$TOOL" set-attr v3.h5 format_version 3
expect_error "format_version 3" 'v3\.h5' 'format version 3' -- "$INSPECT" v3.h5
cp good.h5 flip.h5 && "$TOOL" flip flip.h5 params >/dev/null
expect_error "a damaged file" 'flip\.h5' 'damaged: its SHA-256 digest does not match' -- "$INSPECT" flip.h5
"$TOOL" seal flip.h5 # the damage behind a renewed digest: Fletcher32
expect_error "--verify on a damaged chunk" 'flip\.h5' '/params/layers\.0\.w_ff1' 'damaged' -- "$INSPECT" --verify flip.h5
cp good.h5 nov.h5 && "$TOOL" delete nov.h5 /adam_v/layers.1.b_ff2
expect_error "a missing moment tensor" 'nov\.h5' "'/adam_v/layers\.1\.b_ff2' is missing" -- "$INSPECT" nov.h5
head -c 100000 good.h5 > short.h5
expect_error "a truncated file" 'short\.h5' 'truncated' -- "$INSPECT" short.h5
expect_error "no file" 'one checkpoint file' -- "$INSPECT"
finish
