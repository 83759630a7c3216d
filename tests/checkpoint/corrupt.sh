#!/usr/bin/env bash
# Damaged, foreign and mismatched files: txl_ckpt_read / txl_ckpt_peek return -1 on every rank
# with the same one-line message naming the file and the problem. Damage is caught by the file's
# digest before HDF5 opens it; the checks behind it (Fletcher32, attributes, shapes, values) are
# tested on files changed on purpose and sealed again (test_ckpt seal; the editing modes reseal).
#   corrupt.sh TEST_CKPT TXL_INSPECT MPIEXEC WORKDIR
. "$(dirname "$0")/lib.sh"
run_driver "write good.h5 with 2 ranks" mpi 2 write good.h5 small 4
run_driver "good.h5 reads back" mpi 2 read good.h5 small 4 2
size=$(stat -c %s good.h5)

echo "== truncated"
head -c $((size / 2)) good.h5 > half.h5
head -c $((size - 100)) good.h5 > short.h5
for np in 1 2; do
  run_driver "half a file, $np rank(s)" mpi "$np" read-fail half.h5 small 4 "truncated|$((size / 2)) bytes|should have $size"
  run_driver "all but the last 100 bytes, $np rank(s)" mpi "$np" read-fail short.h5 small 4 "truncated|$((size - 100)) bytes"
done
run_driver "peek: half a file" mpi 2 peek-fail half.h5 "truncated"

echo "== a flipped bit: the digest, before HDF5 reads a byte"
cp good.h5 flip_p.h5 && check "flip a bit of /params/layers.0.w_ff1" "$TOOL" flip flip_p.h5 params
cp good.h5 flip_m.h5 && check "flip a bit of /mems (the last column)" "$TOOL" flip flip_m.h5 mems
for np in 1 2 4; do
  run_driver "damaged parameter chunk, $np rank(s)" mpi "$np" read-fail flip_p.h5 small 4 \
    "the checkpoint is damaged: its SHA-256 digest does not match"
  run_driver "peek of a damaged parameter chunk, $np rank(s)" mpi "$np" peek-fail flip_m.h5 \
    "the checkpoint is damaged: its SHA-256 digest does not match"
done
flip_byte() { # IN OUT OFFSET: OUT is IN with bit 2 of byte OFFSET flipped
  python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[int(sys.argv[3])] ^= 4; open(sys.argv[2], 'wb').write(b)" "$@"
}
flip_byte good.h5 flip_magic.h5 3
run_driver "a flipped bit in the digest header's first line" mpi 2 peek-fail flip_magic.h5 "its digest header"
hex_at=$(grep -abo -m1 'sha256 ' good.h5 | cut -d: -f1)
# another hex digit in place of the 11th of the stored digest
python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); i = int(sys.argv[3]); b[i] = ord('1') if b[i] == ord('0') else ord('0'); open(sys.argv[2], 'wb').write(b)" \
  good.h5 flip_hex.h5 $((hex_at + 7 + 10))
run_driver "a flipped bit in the stored digest" mpi 2 peek-fail flip_hex.h5 "SHA-256 digest does not match"
cp good.h5 long.h5 && printf 'x' >> long.h5
run_driver "a byte appended" mpi 2 peek-fail long.h5 "the file has $((size + 1)) bytes, 1 more than were written"

echo "== behind the digest: a flipped bit with the digest renewed (Fletcher32)"
check "renew the digest of flip_p.h5" "$TOOL" seal flip_p.h5
check "renew the digest of flip_m.h5" "$TOOL" seal flip_m.h5
for np in 1 2 4; do
  run_driver "damaged parameter, $np rank(s)" mpi "$np" read-fail flip_p.h5 small 4 \
    "'/params/layers.0.w_ff1' is damaged|checksum"
  # with 2 and 4 ranks only the last rank reads the damaged column: the others must learn it
  run_driver "damaged memory column, $np rank(s)" mpi "$np" read-fail flip_m.h5 small 4 \
    "'/mems' is damaged|checksum"
done
run_driver "peek does not read tensors" mpi 2 read good.h5 small 4

echo "== wrong format"
cp good.h5 v3.h5 && check "rewrite format_version = 3" "$TOOL" set-attr v3.h5 format_version 3
run_driver "format_version 3 (read)" mpi 2 read-fail v3.h5 small 4 "format version 3 is not supported"
run_driver "format_version 3 (peek)" mpi 1 peek-fail v3.h5 "format version 3 is not supported"
# version 1 files (before run_id and vocab_digest) are still read
cp good.h5 v1.h5 && check "rewrite format_version = 1" "$TOOL" set-attr v1.h5 format_version 1
run_driver "format_version 1 is read" mpi 2 read v1.h5 small 4
cp good.h5 noformat.h5 && check "delete the format attribute" "$TOOL" del-attr noformat.h5 format
run_driver "no format attribute" mpi 2 peek-fail noformat.h5 "not a txl checkpoint"
cp good.h5 nolr.h5 && check "delete the lr attribute" "$TOOL" del-attr nolr.h5 lr
run_driver "no lr attribute" mpi 2 read-fail nolr.h5 small 4 "attribute 'lr' is missing"

echo "== root attributes of the wrong type"
cp good.h5 tstep.h5 && check "rewrite step as a string" "$TOOL" set-attr-str tstep.h5 step 12
run_driver "step is a string" mpi 2 peek-fail tstep.h5 "root attribute 'step' is a string, expected an integer"
cp good.h5 tseed.h5 && check "rewrite seed as a float64" "$TOOL" set-attr-f64 tseed.h5 seed 2.5
run_driver "seed is a float" mpi 2 read-fail tseed.h5 small 4 \
  "root attribute 'seed' is a floating-point number, expected an integer"
cp good.h5 tlr.h5 && check "rewrite lr as an integer" "$TOOL" set-attr tlr.h5 lr 3
run_driver "lr is an integer" mpi 1 peek-fail tlr.h5 "root attribute 'lr' is an integer, expected a floating-point number"
cp good.h5 tformat.h5 && check "rewrite format as an integer" "$TOOL" set-attr tformat.h5 format 7
run_driver "format is an integer" mpi 2 peek-fail tformat.h5 "root attribute 'format' is an integer, expected a string"
cp good.h5 trun.h5 && check "rewrite run_id as an integer" "$TOOL" set-attr trun.h5 run_id 7
run_driver "run_id is an integer" mpi 2 peek-fail trun.h5 "root attribute 'run_id' is an integer, expected a string"

echo "== values no checkpoint may hold (written with a matching checksum)"
# good.h5 is the small shape: /mems [2, 5, 4, 16] with mem_rows 4 (step 4); element 562 is
# layer 1, row 3, column 3 (read by the last rank only), feature 2; element 256 is row 4 of
# layer 0, past the valid rows
for spec in "params/layers.0.w_ff1 5 nan NaN" "params/word_emb 0 inf +Inf" \
            "adam_m/layers.1.w_o 17 -inf -Inf" "adam_v/out_bias 3 nan NaN" \
            "adam_v/layers.1.b_ff2 7 -0.25 -0.25 at element 7, a negative second moment" \
            "mems 562 nan NaN at element 562"; do
  read -r dset index value want <<< "$spec"
  f=bad_${dset//\//_}.h5
  cp good.h5 "$f" && check "write $value into /$dset[$index]" "$TOOL" poke "$f" "/$dset" "$index" "$value"
  for np in 1 2 4; do
    run_driver "$value in /$dset, $np rank(s)" mpi "$np" read-fail "$f" small 4 \
      "dataset '/$dset' holds $want|unusable"
  done
done
cp good.h5 mem_past.h5 && check "write NaN into /mems past the valid rows" "$TOOL" poke mem_past.h5 /mems 256 nan
run_driver "NaN past the valid rows of /mems is no error" mpi 2 read-any mem_past.h5 small
cp good.h5 zero_v.h5 && check "write 0 and -0 into /adam_v/word_emb" "$TOOL" poke zero_v.h5 /adam_v/word_emb 0 0
"$TOOL" poke zero_v.h5 /adam_v/word_emb 1 -0.0
run_driver "a zero second moment (+0 and -0) is no error" mpi 2 read-any zero_v.h5 small

echo "== padded rows (the CUDA backend's layout, CKPT_TEST_ROW_ALIGN=8): the same file"
# the odd shape's widths (d_model 20, H*dh 21, d_inner 30) are no multiple of 8: with rows padded
# to 8 every GEMM weight's rows lie apart and W_kv starts at column 24 of W_qkv's 72
run_driver "write odd.h5 from packed rows" mpi 2 write odd.h5 odd 4
export CKPT_TEST_ROW_ALIGN=8
run_driver "odd.h5 read into rows padded to 8: bit-identical, the gaps untouched" mpi 2 read odd.h5 odd 4 2
run_driver "write odd8.h5 from rows padded to 8" mpi 2 write odd8.h5 odd 4
cp odd.h5 odd_nan.h5 && check "write NaN into /params/layers.0.w_qkv[25] (W_kv's block)" \
  "$TOOL" poke odd_nan.h5 /params/layers.0.w_qkv 25 nan
run_driver "NaN in padded W_qkv named at its element" mpi 2 read-fail odd_nan.h5 odd 4 \
  "dataset '/params/layers.0.w_qkv' holds NaN at element 25|unusable"
cp odd.h5 odd_neg.h5 && check "write -0.25 into /adam_v/layers.1.w_ff1[40]" \
  "$TOOL" poke odd_neg.h5 /adam_v/layers.1.w_ff1 40 -0.25
run_driver "negative moment in padded rows named at its element" mpi 2 read-fail odd_neg.h5 odd 4 \
  "dataset '/adam_v/layers.1.w_ff1' holds -0.25 at element 40, a negative second moment"
unset CKPT_TEST_ROW_ALIGN
run_driver "odd8.h5 read into packed rows: bit-identical" mpi 2 read odd8.h5 odd 4 2
check "odd.h5 and odd8.h5 hold the same bytes" cmp odd.h5 odd8.h5

echo "== missing datasets"
cp good.h5 nov.h5 && check "delete /adam_v/layers.1.b_ff2" "$TOOL" delete nov.h5 /adam_v/layers.1.b_ff2
run_driver "missing moment tensor" mpi 2 read-fail nov.h5 small 4 "'/adam_v/layers.1.b_ff2' is missing"
cp good.h5 nomems.h5 && check "delete /mems" "$TOOL" delete nomems.h5 /mems
run_driver "missing /mems" mpi 2 read-fail nomems.h5 small 4 "'/mems' is missing"

echo "== another model"
run_driver "d_inner 48 instead of 32" mpi 2 read-fail good.h5 other 4 \
  "'/params/layers.0.w_ff1' has shape [16, 32], this model has [16, 48]|another model"
run_driver "write an untied model" mpi 1 write untied.h5 untied 4
run_driver "untied file into a tied model" mpi 2 read-fail untied.h5 small 4 "another model|out_weight"

echo "== a file without a digest (as an older txl wrote it): read after a notice"
export TXL_CKPT_FAULT=no_digest # the writer's test hook: no user block, no digest
run_driver "write plain.h5 without a digest" mpi 2 write plain.h5 small 4
unset TXL_CKPT_FAULT
head -c 8 plain.h5 | od -An -c | grep -q 'H   D   F' && ok "plain.h5 is HDF5 from its first byte" || fail "plain.h5 has a user block"
out=$(mpi 2 read plain.h5 small 4 2 2>&1)
[ $? -eq 0 ] && ok "plain.h5 reads back, bit-identical" || fail "plain.h5 does not read: $out"
[ "$(printf '%s\n' "$out" | grep -c "plain.h5 has no digest (written by an older txl)")" -eq 1 ] \
  && ok "one notice that plain.h5 has no digest" || fail "no single notice for plain.h5: $out"
cp plain.h5 plain_flip.h5 && check "flip a bit of plain.h5's /params/layers.0.w_ff1" "$TOOL" flip plain_flip.h5 params
run_driver "without a digest, Fletcher32 as before" mpi 2 read-fail plain_flip.h5 small 4 \
  "'/params/layers.0.w_ff1' is damaged|checksum"
"$TOOL" seal plain.h5 2>/dev/null && fail "seal gave plain.h5 a digest" || ok "no digest to renew in plain.h5"

echo "== no checkpoint at all"
echo "some text" > text.h5
: > empty.h5
for f in text.h5 empty.h5; do
  run_driver "$f (read)" mpi 2 read-fail "$f" small 4 "not an HDF5 file"
  run_driver "$f (peek)" mpi 1 peek-fail "$f" "not an HDF5 file"
done
run_driver "missing file (read)" mpi 2 read-fail missing.h5 small 4 "No such file"
run_driver "missing file (peek)" mpi 1 peek-fail missing.h5 "No such file"
mkdir -p adir.h5
run_driver "a folder" mpi 1 peek-fail adir.h5 "not a regular file"
finish
