#!/bin/bash
# On the H200 (device tool), one call: issue #22's figures. The portable
# kernels (CLATTN_PORTABLE=1) at the shapes, f16 / int4 / fp8, then
# `clattn tune --family decode` natively and on the portable kernels, each
# writing its file under $OUT (the tuner prints the preset against its
# choice, timed again one after the other). Carry .debs and build-gpubin
# (see tools/gpu_session.sh for filling it).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
C=./build-gpubin/new/clattn
$C devices --params --device NVIDIA > $OUT/params.txt 2>&1
H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 10 --no-check"
{
  for shape in "--batch 64 --ctx 4096" "--batch 64 --ctx 32768" "--batch 1 --ctx 32768"; do
    for mode in native portable; do
      e=$([ $mode = portable ] && echo "CLATTN_PORTABLE=1" || echo "CLATTN_X=0")
      echo "$mode f16 $shape: $(env $e $C run decode $H $shape | grep -E '^(time|bandwidth)' | tr '\n' ' ')"
    done
  done
  for kv in int4 fp8; do
    echo "portable $kv --batch 64 --ctx 32768: $(CLATTN_PORTABLE=1 $C run decode $H --batch 64 --ctx 32768 --kv-dtype $kv | grep -E '^(time|bandwidth)' | tr '\n' ' ')"
  done
} 2>&1 | tee $OUT/portable.txt
timeout ${TUNE_S:-250} $C tune --family decode --out $OUT/tune-native.txt > $OUT/tune-native.log 2>&1
echo "native tune rc=$?"; tail -12 $OUT/tune-native.log
CLATTN_PORTABLE=1 timeout ${TUNE_S:-250} $C tune --family decode --out $OUT/tune-portable.txt > $OUT/tune-portable.log 2>&1
echo "portable tune rc=$?"; tail -12 $OUT/tune-portable.log
