#!/bin/bash
# On the H200 (device tool): the kvcache suite on the NVIDIA device (the
# codecs must be bit-identical to PoCL's) and the quantize / dequantize
# throughput of `clattn run quant` for every quantized dtype. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
$B/tests/test_kvcache > $OUT/kvcache_tests.txt 2>&1
grep -E "Test:|FAIL|differs|asserts" $OUT/kvcache_tests.txt | grep -v passed | head -20
r() { echo "== $*"; $B/clattn run quant "$@" 2>&1 | grep -E "quant:|check|round trip|quantize|error|FAIL"; }
{
# 262144 positions x 8 heads x D=128: 512 MiB of f16 rows (past the 50 MB L2)
for kv in int4 int4g2 int4g4 int4g8 fp8 fp8fnuz; do
  r --kv-dtype $kv --rows 262144 --heads 8 --head-dim 128 --dtype f16 --repeat 20
done
r --kv-dtype int4 --rows 262144 --heads 8 --head-dim 128 --dtype bf16 --repeat 20
r --kv-dtype fp8 --rows 131072 --heads 8 --head-dim 256 --dtype f32 --repeat 20
r --kv-dtype int4g2 --rows 262144 --heads 8 --head-dim 80 --dtype f16 --repeat 20
} 2>&1 | tee $OUT/quant_bench.txt
