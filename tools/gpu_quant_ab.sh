#!/bin/bash
# On the H200 (device tool), one call: test_kvcache (the lane form natively,
# the row-wise form as the other), then `clattn run quant` of build-gpubin/old
# (an earlier commit, kernels embedded) and build-gpubin/new (the tree's cl/)
# interleaved: quantize and dequantize times per cache dtype. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
N=./build-gpubin/new O=./build-gpubin/old
if [ -z "$NO_TESTS" ]; then
  timeout 200 $N/test_kvcache > $OUT/test_kvcache.txt 2>&1
  echo "test_kvcache rc=$? $(grep -E '^ +asserts' $OUT/test_kvcache.txt)"
  CLATTN_PORTABLE=1 CLATTN_TEST_ONLY="quantized K/V: fp8" timeout 120 $N/test_decode > $OUT/test_decode_fp8.txt 2>&1
  echo "test_decode fp8 portable rc=$? $(grep -E '^ +asserts' $OUT/test_decode_fp8.txt)"
fi
q() { local bin=$1; shift
  local k=$([ $bin = $O ] && echo "env -u CLATTN_KERNEL_DIR CLATTN_CACHE_DIR=/tmp/cache-old" || echo env)
  $k $bin/clattn run quant "$@" --rows 65536 --heads 8 --head-dim 128 --repeat 20 2>&1 |
    sed -n -e 's/^quantize: *\([0-9.]*\) ms.*/q \1/p' -e 's/^dequantize: *\([0-9.]*\) ms.*/dq \1/p' -e 's/.*check.*\(PASS\|FAIL\).*/\1/p' | tr '\n' ' '; }
for r in 1 2; do for kv in int4 fp8 fp8fnuz int4g4; do for b in $O $N; do
  echo "$kv $(basename $b) $(q $b --kv-dtype $kv)"
done; done; done | tee $OUT/quant_ab.txt
