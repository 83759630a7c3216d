#!/usr/bin/env bash
# txl-prep on bad input: each case must end with one "txl: error:" line naming the file and the
# problem, a non-zero exit, and no output or temporary file left behind.
#   prep_bad_input.sh TXL_PREP CORPUS_TOOL WORKDIR
PREP=$1 TOOL=$2 WORK=$3
. "$(dirname "$0")/lib.sh"
umount "$WORK/full" 2>/dev/null  # left mounted by a run that was killed
rm -rf "$WORK" && mkdir -p "$WORK/out" && cd "$WORK" || exit 2

printf 'a b c\nd e\n' > good.txt
printf 'x y\n' > good2.txt
: > empty.txt
printf 'fine line\nalso fine\nbad \303\050 here\nlast\n' > badutf8.txt   # line 3: C3 28
printf 'ok\n\355\240\200 surrogate\n' > surrogate.txt                    # line 2: encoded U+D800
printf 'ok\nok\nok\n\300\257 overlong\n' > overlong.txt                 # line 4: overlong '/'
seq 1 300 | sed 's/^/w/' > many.txt                                      # 300 distinct words

# run OUTNAME ARGS...: txl-prep with good defaults overridden by ARGS (later options win)
run() {
  local out=$1
  shift
  "$PREP" --mode word --train good.txt --valid good.txt --test good2.txt --out "$out" --quiet "$@"
}

echo "== inputs"
expect_error "missing train file" 'missing\.txt' 'cannot open the train file' 'No such file' -- \
  run out/o1.h5 --train missing.txt
no_leftovers "missing train file" out o1
expect_error "missing test file" 'nothere/t\.txt' 'test file' -- run out/o2.h5 --test nothere/t.txt
no_leftovers "missing test file" out o2
expect_error "empty valid split" 'empty\.txt' 'valid split has no tokens' -- run out/o3.h5 --valid empty.txt
no_leftovers "empty valid split" out o3
expect_error "empty train split, char mode" 'empty\.txt' 'train split has no tokens' -- \
  run out/o3c.h5 --mode char --train empty.txt
expect_error "empty test split, byte mode" 'empty\.txt' 'test split has no tokens' -- \
  run out/o3b.h5 --mode byte --test empty.txt
no_leftovers "empty splits" out o3
expect_error "invalid UTF-8, word mode" 'badutf8\.txt:3:' 'invalid UTF-8' -- run out/o4.h5 --valid badutf8.txt
no_leftovers "invalid UTF-8, word mode" out o4
expect_error "invalid UTF-8, char mode" 'badutf8\.txt:3:' 'invalid UTF-8' '0xC3' -- \
  run out/o5.h5 --mode char --test badutf8.txt
no_leftovers "invalid UTF-8, char mode" out o5
expect_error "UTF-8-encoded surrogate" 'surrogate\.txt:2:' 'invalid UTF-8' -- run out/o6.h5 --train surrogate.txt
expect_error "overlong UTF-8" 'overlong\.txt:4:' 'invalid UTF-8' -- run out/o7.h5 --mode char --train overlong.txt
no_leftovers "surrogate / overlong" out o
check "byte mode does not check UTF-8" run out/b.h5 --mode byte --train badutf8.txt
rm -f out/b.h5
expect_error "a directory as input" "$(re_quote "$WORK")/out" 'train file' 'is a directory' -- run out/o8.h5 --train "$WORK/out"
no_leftovers "a directory as input" out o8

echo "== output"
expect_error "output in a missing directory" 'nodir/x\.h5' 'cannot create the output file' 'No such file' -- \
  run nodir/x.h5
expect_error "output under a regular file" 'good\.txt/x\.h5' 'Not a directory' -- run good.txt/x.h5
expect_error "output is a directory" 'out' 'is a directory' -- run out
cp good2.txt same.txt
expect_error "output is an input file" 'same\.txt' 'is the test file' -- run same.txt --test same.txt
check "the input is left as it was" cmp same.txt good2.txt
if [ "$(id -u)" != 0 ]; then
  mkdir ro && chmod 555 ro
  expect_error "output in a read-only directory" 'ro/x\.h5' 'Permission denied' -- run ro/x.h5
  no_leftovers "read-only directory" ro x
  chmod 755 ro
else
  echo "not run here: the read-only directory case (running as root, permissions are not enforced)"
fi
check "vocabulary of 301 words fits auto (uint16)" run out/many.h5 --train many.txt
check_eq "auto chose uint16" "$("$TOOL" dtype out/many.h5 train)" uint16
rm -f out/many.h5
expect_error "vocabulary too big for --dtype uint8" 'out/o9\.h5' '301 tokens' 'uint8' -- \
  run out/o9.h5 --train many.txt --valid many.txt --test many.txt --dtype uint8
no_leftovers "vocabulary too big for --dtype uint8" out o9
expect_error "--max-size leaves no room for <unk>" 'out/o10\.h5' 'no room for <unk>' -- \
  run out/o10.h5 --max-size 1
no_leftovers "no room for <unk>" out o10

echo "== a full disk (a small tmpfs): one line naming the output and the reason, nothing left"
seq 1 20000 | sed 's/^/w/' > words.txt   # about 0.5 MB of output
mkdir -p full
if mount -t tmpfs -o size=8k tmpfs full 2>/dev/null; then
  trap 'umount "$WORK/full" 2>/dev/null' EXIT
  umount full
  # the sizes run out of space at different places: the vocabulary, its offsets, the ids
  for size in 4k 64k 256k 512k; do
    mount -t tmpfs -o size=$size tmpfs full
    expect_error "full disk at $size" 'full/o\.h5' 'writing the output failed' 'No space left on device' -- \
      run full/o.h5 --train words.txt --valid words.txt --test words.txt
    no_leftovers "full disk at $size" full o
    run full/o.h5 --train words.txt --valid words.txt --test words.txt 2>/dev/null
    check_eq "full disk at $size: exit status" $? 1
    umount full
  done
else
  echo "not run here: the full-disk cases (mounting a tmpfs is not allowed here)"
fi

echo "== a failed run leaves an existing output untouched"
check "make a good output" run out/keep.h5
cp out/keep.h5 keep.copy
expect_error "failing run over an existing output" 'missing\.txt' -- run out/keep.h5 --valid missing.txt
check "the existing output is unchanged" cmp out/keep.h5 keep.copy
check_eq "and no temporary file is left" "$(ls out)" keep.h5
rm -f out/keep.h5

echo "== interrupted run (SIGTERM while reading)"
mkfifo fifo
# (txl-prep itself in the background, not the shell function run: $! must be its pid)
"$PREP" --mode word --train fifo --valid good.txt --test good.txt --out out/sig.h5 --quiet &
pid=$!
for _ in $(seq 1 100); do ls out/sig.h5.tmp-* >/dev/null 2>&1 && break; sleep 0.05; done
if ls out/sig.h5.tmp-* >/dev/null 2>&1; then ok "the temporary file exists while running"; else fail "no temporary file seen"; fi
kill -TERM $pid
exec 3<>fifo; exec 3>&-  # (read-write open never blocks) unblocks txl-prep should it still wait
wait $pid
rc=$?
if [ $rc -eq 143 ]; then ok "interrupted run ends by SIGTERM (exit status $rc)"; else fail "interrupted run: exit status $rc, expected 143 (SIGTERM)"; fi
no_leftovers "interrupted run" out sig

echo "== temporary files that killed runs left behind"
host=$(hostname)
mkdir -p stale
sleep 300 &
live=$!
dead=2147483647   # no process can have this pid (pid_max is at most 2^22)
: > "stale/s.h5.tmp-$dead@$host"
: > "stale/s.h5.tmp-$live@$host"
: > "stale/s.h5.tmp-$dead@another-host"   # a shared file system: that host's processes are unknown here
: > "stale/other.h5.tmp-$dead@$host"      # another output's
"$PREP" --mode word --train good.txt --valid good.txt --test good2.txt --out stale/s.h5 --quiet 2> stale.err
check_eq "the run succeeds" $? 0
check_eq "one notice" "$(grep -c "removed stale/s.h5.tmp-$dead@$host, the temporary file of a run that ended without removing it (process $dead on this host no longer runs)" stale.err)/$(wc -l < stale.err)" 1/1
check_eq "what is left: the output, the live process's temporary, another host's, another output's" \
  "$(cd stale && ls | sort | tr '\n' ' ')" \
  "$(printf '%s\n' "other.h5.tmp-$dead@$host" s.h5 "s.h5.tmp-$dead@another-host" "s.h5.tmp-$live@$host" | sort | tr '\n' ' ')"
check "the output is a corpus" "$TOOL" info stale/s.h5
kill $live
wait $live 2>/dev/null
"$PREP" --mode word --train good.txt --valid good.txt --test good2.txt --out stale/s.h5 --quiet 2> stale.err
check_eq "once its process has ended, that temporary goes too" "$(grep -c "removed stale/s.h5.tmp-$live@$host" stale.err)" 1
check_eq "and the others stay" "$(cd stale && ls | sort | tr '\n' ' ')" \
  "$(printf '%s\n' "other.h5.tmp-$dead@$host" s.h5 "s.h5.tmp-$dead@another-host" | sort | tr '\n' ' ')"

echo "== command line"
expect_error "unknown mode" '--mode' "'words'" -- run out/c.h5 --mode words
expect_error "negative --min-freq" '--min-freq' "'-1'" -- run out/c.h5 --min-freq -1
expect_error "non-numeric --max-size" '--max-size' "'ten'" -- run out/c.h5 --max-size ten
expect_error "bad --vocab-from" '--vocab-from' "'valid'" -- run out/c.h5 --vocab-from valid
expect_error "bad --dtype" '--dtype' "'int8'" -- run out/c.h5 --dtype int8
expect_error "unknown option" "unknown option '--lowercase'" -- run out/c.h5 --lowercase
expect_error "missing --out" '--out FILE\.h5 is required' -- \
  "$PREP" --mode word --train good.txt --valid good.txt --test good.txt
expect_error "missing --valid" '--valid FILE is required' -- \
  "$PREP" --mode word --train good.txt --test good.txt --out out/c.h5
expect_error "--min-freq in byte mode" 'do not apply to --mode byte' -- run out/c.h5 --mode byte --min-freq 2
no_leftovers "command line errors" out c
help=$("$PREP" --help)
rc=$?
check_eq "--help exits 0" $rc 0
missing=""
for opt in --mode --train --valid --test --out --lower --min-freq --max-size --vocab-from --spm-vocab --spm-type \
    --spm-model --dtype --quiet; do
  case "$help" in *"$opt"*) ;; *) missing="$missing $opt" ;; esac
done
check_eq "--help lists every option" "${missing:-none missing}" "none missing"
case "$help" in *"(default: 0"*"(default: all)"*"(default: auto)"*) ok "--help gives the defaults" ;;
  *) fail "--help does not give the defaults" ;; esac
finish
