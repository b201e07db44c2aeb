#!/bin/bash
# Session 27's last call (device tool): the suites the session's kernel
# changes touch on the H200, native and with CLATTN_PORTABLE=1, then issue
# #22's portable figures (f16 at its three shapes, int4 / int4g4 / fp8 /
# fp8fnuz at B=64 ctx=32768) and the native quantized ones, same call.
. tools/gpu_env.sh
. tools/gpu_suite.sh
for t in decode kvcache merge host safety; do suite test_$t $B/test_$t; done
suite "test_decode portable" env CLATTN_PORTABLE=1 $B/test_decode
H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 20 --no-check"
t() { echo "$* | $(env $1 $B/clattn run decode $H ${@:2} 2>&1 | grep -E '^(time|bandwidth)' | cut -c1-60 | tr '\n' ' ')"; }
{
  for s in "--batch 1 --ctx 32768" "--batch 64 --ctx 4096" "--batch 64 --ctx 32768"; do t CLATTN_PORTABLE=1 $s; done
  for kv in int4 int4g4 fp8 fp8fnuz; do t CLATTN_PORTABLE=1 --batch 64 --ctx 32768 --kv-dtype $kv; done
  for kv in f16 int4 fp8 fp8fnuz; do t CLATTN_X=0 --batch 64 --ctx 32768 --kv-dtype $kv; done
} | tee $OUT/bench.txt
cat $OUT/summary.txt
