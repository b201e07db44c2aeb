#!/bin/bash
# On the H200 (device tool), one call: (1) the tree's cl/ against
# build-gpubin/oldcl/cl (another commit's kernels: `git archive REV cl | tar
# -x -C build-gpubin/oldcl`), same binary, interleaved; (2) decode_merge_last
# = 8 (two launches above 8 splits) against 32 (one launch up to 32) at the
# shapes that take 9-32 splits; (3) split sweeps with one launch up to 32;
# (4) D = 64 / 80: registers and split counts. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
N=./build-gpubin/new
d() { local kd=$1 tf=$2; shift 2
  printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt
  CLATTN_KERNEL_DIR=$kd CLATTN_CACHE_DIR=/tmp/cache-$(basename $(dirname $kd)) CLATTN_TUNING_FILE=/tmp/t.txt \
    $N/clattn run decode "$@" --repeat 30 --no-check 2>&1 |
    sed -n -e 's/^kernel: tensor cores, //p' -e 's/^kernel: //p' -e 's/^time: \([0-9.]*\) ms.*/\1/p' -e 's/^last kernel: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
NEW=$PWD/cl OLD=$PWD/build-gpubin/oldcl/cl
H="--heads 32 --kv-heads 8 --dtype f16"
if [ -z "$NO_TESTS" ]; then
  timeout 200 $N/test_decode > $OUT/test_decode.txt 2>&1; echo "test_decode rc=$? $(grep -E '^ +asserts' $OUT/test_decode.txt)"
fi
echo "== (1) old / new kernels, split counts <= 8"
while read -r name args; do
  [ -z "$name" ] && continue
  for r in 1 2; do for kd in $OLD $NEW; do echo "$name $([ $kd = $OLD ] && echo old || echo new) $(d $kd '' $H $args)"; done; done
done <<'L' | tee $OUT/ab.txt
1x4k --batch 1 --ctx 4096
8x32k --batch 8 --ctx 32768
16x8k --batch 16 --ctx 8192
1x4k_s4 --batch 1 --ctx 4096 --splits 4
L
echo "== (2) merge_last 8 / 32"
while read -r name args; do
  [ -z "$name" ] && continue
  for r in 1 2; do for ml in 8 32; do echo "$name ml$ml $(d $NEW decode_merge_last=$ml $H $args)"; done; done
done <<'L' | tee $OUT/ml.txt
1x16k --batch 1 --ctx 16384
1x32k --batch 1 --ctx 32768
1x128k --batch 1 --ctx 131072
4x8k --batch 4 --ctx 8192
4x32k --batch 4 --ctx 32768
1x128k_h32 --batch 1 --ctx 131072 --kv-heads 32
2x8k --batch 2 --ctx 8192
fp8_1x32k --batch 1 --ctx 32768 --kv-dtype fp8
L
echo "== (3) sweep, one launch up to 32"
for ctx in 4096 16384 32768; do for s in 8 12 16 24 32; do
  echo "1x$ctx s$s $(d $NEW decode_merge_last=32 $H --batch 1 --ctx $ctx --splits $s)"
done; done | tee $OUT/sweep.txt
for s in 8 12 16 24 32; do echo "4x8k s$s $(d $NEW decode_merge_last=32 $H --batch 4 --ctx 8192 --splits $s)"; done | tee -a $OUT/sweep.txt
echo "== (4) D=64 / 80 split counts"
for D in 64 80; do
  CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose CLATTN_CACHE_DIR=/tmp/cache-v $N/clattn run decode $H --batch 16 --ctx 8192 --head-dim $D --repeat 1 --no-check 2>&1 | grep -i -E "registers|work-group" | head -6
  for s in 0 3 4 5 6 8; do echo "d$D s$s $(d $NEW '' $H --batch 16 --ctx 8192 --head-dim $D --splits $s)"; done
  echo "d128 s0 $(d $NEW '' $H --batch 16 --ctx 8192 --head-dim 128)"
done | tee $OUT/dims.txt
