#!/bin/bash
# On the H200 (device tool): decode correctness on the NVIDIA device and the
# issue's decode benchmarks. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/smi.txt 2>&1
$B/clattn devices > $OUT/devices.txt 2>&1
( $B/tests/test_decode; $B/tests/test_host ) > $OUT/tests.txt 2>&1
grep -E "Test:|FAIL|asserts|->" $OUT/tests.txt | grep -v passed | head -20
r() { echo "== $*"; $B/clattn run decode "$@" 2>&1 | grep -E "decode:|check|time|bandwidth|error|FAIL"; }
{
r --batch 1 --heads 32 --kv-heads 8 --head-dim 128 --ctx 32768 --dtype f16
r --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16
r --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 32768 --dtype f16
r --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16 --paged --page-size 16
r --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 4096 --dtype f16 --paged --page-size 256
r --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 32768 --dtype f16 --paged --page-size 16
r --batch 64 --heads 32 --kv-heads 8 --head-dim 128 --ctx 32768 --dtype f16 --paged --page-size 256
r --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --ctx 2048 --dtype bf16 --causal --q-len 4 --lse --check
} 2>&1 | tee $OUT/bench.txt
