#!/bin/bash
# On the H200 (device tool): the tensor-core decode: tests (mma.sync and, with
# CLATTN_PORTABLE=1, its emulation on the same GPU), then the issue's decode
# shapes over tuning choices given as arguments (key=value[,key=value] each;
# "-" for the table's row). Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
if [ -z "$NO_TESTS" ]; then
  ( $B/tests/test_decode ) > $OUT/tests.txt 2>&1
  ( CLATTN_PORTABLE=1 CLATTN_TEST_ONLY=tensor-core $B/tests/test_decode ) > $OUT/tests_emu.txt 2>&1
  grep -E "FAIL|asserts|element" $OUT/tests.txt $OUT/tests_emu.txt | head -20
fi
r() { echo "== $*"; $B/clattn run decode "$@" 2>&1 | grep -E "^time|bandwidth|error|FAIL|splits"; }
SHAPES=${SHAPES:-"1:32768:f16 64:4096:f16 64:32768:f16 64:32768:int4 64:32768:fp8"}
for s in $SHAPES; do
  IFS=: read bb ctx kv <<< "$s"
  for cfg in "$@"; do
    echo "$cfg" | tr ',' '\n' | grep -v '^-$' > /tmp/tune.txt
    echo "## $cfg"
    CLATTN_TUNING_FILE=/tmp/tune.txt r --batch $bb --ctx $ctx --kv-dtype $kv --heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 20 --no-check
  done
done 2>&1 | tee $OUT/bench.txt
