#!/bin/bash
# On the H200 (device tool): the tensor-core decode: tests (mma.sync and, with
# CLATTN_PORTABLE=1, its emulation on the same GPU), then the decode
# shapes for split targets and against the portable form. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
( $B/tests/test_decode ) > $OUT/tests.txt 2>&1
( CLATTN_PORTABLE=1 CLATTN_TEST_ONLY=tensor-core $B/tests/test_decode ) > $OUT/tests_emu.txt 2>&1
grep -E "FAIL|asserts|element" $OUT/tests.txt $OUT/tests_emu.txt | head -20
CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose $B/clattn run decode --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16 --repeat 3 --no-check 2>&1 | grep -iE "registers|spill|stack" | head -4
r() { echo "== $*"; $B/clattn run decode "$@" 2>&1 | grep -E "time|bandwidth|error|FAIL|splits"; }
shapes=("--batch 1 --ctx 32768" "--batch 64 --ctx 4096" "--batch 64 --ctx 32768")
for s in "${shapes[@]}"; do
  for cfg in "decode_mma=0" "decode_mma_splits_per_cu=2" "decode_mma_splits_per_cu=4" "decode_mma_splits_per_cu=8" "decode_mma_splits_per_cu=16"; do
    echo "$cfg" > /tmp/tune.txt
    echo "## $cfg"
    CLATTN_TUNING_FILE=/tmp/tune.txt r $s --heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 20 --no-check
  done
done 2>&1 | tee $OUT/bench.txt
