#!/bin/bash
# On the H200 (device tool): the CLI plumbing, the CLBlast baseline suite on
# the NVIDIA device, and the three decode shapes against the CLBlast
# unfused path (time, bandwidth, speedup; JSON lines in $OUT/decode.jsonl).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
$B/clattn devices > $OUT/devices.txt 2>&1
$B/tests/test_baseline > $OUT/baseline_tests.txt 2>&1
grep -E "Test:|FAIL|asserts" $OUT/baseline_tests.txt | grep -v passed | head -20
$B/embed-example > $OUT/embed.txt 2>&1
S="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --baseline"
{
$B/clattn run decode --batch 1 --ctx 32768 $S
$B/clattn run decode --batch 64 --ctx 4096 $S
$B/clattn run decode --batch 64 --ctx 32768 $S
} 2>&1 | tee $OUT/decode.txt
for c in "--batch 1 --ctx 32768" "--batch 64 --ctx 4096" "--batch 64 --ctx 32768"; do
  $B/clattn run decode $c $S --json
done > $OUT/decode.jsonl 2>&1
