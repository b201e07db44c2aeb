#!/bin/bash
# On the H200 (device tool): every test suite on the NVIDIA device (fast paths,
# then the decode and ReRoPE suites with CLATTN_PORTABLE=1: the portable twins
# and the emulated tensor-core kernels on the same GPU), then the issues'
# benchmarks. Logs under $OUT (tests.txt, bench.txt: two files, within what the
# device tool brings back); the suites' summary lines come again at the end.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
: > $OUT/tests.txt
: > /tmp/summary.txt
suite() { # name, then the command
  local name=$1 log=/tmp/suite.txt; shift
  "$@" > $log 2>&1
  echo "$name rc=$? $(grep -E '^ +asserts' $log)" | tee -a /tmp/summary.txt
  { echo "===== $name"; cat $log; } >> $OUT/tests.txt
}
for t in decode rerope kvcache merge host baseline; do suite test_$t $B/tests/test_$t; done
for t in decode rerope; do suite "test_$t portable" env CLATTN_PORTABLE=1 $B/tests/test_$t; done
d() { echo "== clattn run decode $*"; $B/clattn run decode "$@" 2>&1 | grep -E "^decode|^check|^time|^bandwidth|error|FAIL"; }
{
for s in "1 32768" "64 4096" "64 32768"; do set -- $s
  d --batch $1 --heads 32 --kv-heads 8 --head-dim 128 --ctx $2 --dtype f16 --repeat 20 --no-check
done
for kv in f16 int4 fp8 int4g2 int4g4 int4g8; do
  d --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 32768 --dtype f16 --kv-dtype $kv --repeat 20 --no-check
done
d --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 32768 --dtype f16 --kv-dtype int4 --paged --page-size 16 --repeat 20 --no-check
for ps in 16 256; do for c in 4096 32768; do
  d --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx $c --dtype f16 --paged --page-size $ps --repeat 20 --no-check
done; done
d --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --ctx 2048 --dtype bf16 --causal --q-len 4 --lse
d --batch 2 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16 --kv-dtype int4 --paged --page-size 16 --lse
d --batch 2 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16 --kv-dtype fp8 --varlen --lse
d --batch 2 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16 --kv-dtype int4g8 --paged --page-size 16 --causal --q-len 2 --lse
d --batch 8 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16
for c in "" --causal; do
  echo "== clattn run rerope --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype f16 $c --backward"
  $B/clattn run rerope --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype f16 $c --backward --repeat 10 2>&1 | grep -iE "forward|backward|error|check"
done
} 2>&1 | tee $OUT/bench.txt
echo "== test suites"; cat /tmp/summary.txt
