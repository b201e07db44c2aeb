#!/bin/bash
# On the H200 (device tool), one call: the decode suite (native and
# CLATTN_PORTABLE=1), then decode times of build-gpubin/old (an earlier
# commit, kernels embedded) and build-gpubin/new (the tree's cl/)
# interleaved, small batches first, with the last kernel's own time; then a
# split-count sweep of the new build at B=1. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
N=./build-gpubin/new O=./build-gpubin/old
if [ -z "$NO_TESTS" ]; then
  timeout 300 $N/test_decode > $OUT/test_decode.txt 2>&1; echo "test_decode rc=$? $(grep -E '^ +asserts' $OUT/test_decode.txt)"
  [ -n "$NATIVE_ONLY" ] || CLATTN_PORTABLE=1 timeout 300 $N/test_decode > $OUT/test_decode_p.txt 2>&1; echo "test_decode portable rc=$? $(grep -E '^ +asserts' $OUT/test_decode_p.txt)"
fi
d() { local bin=$1 tf=$2; shift 2
  local k=$([ $bin = $O ] && echo "env -u CLATTN_KERNEL_DIR CLATTN_CACHE_DIR=/tmp/cache-old" || echo env)
  printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt
  $k CLATTN_TUNING_FILE=/tmp/t.txt $bin/clattn run decode "$@" --repeat 30 --no-check 2>&1 |
    sed -n -e 's/^kernel: tensor cores, //p' -e 's/^kernel: //p' -e 's/^time: \([0-9.]*\) ms.*/\1/p' -e 's/^last kernel: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16"
ALL='f16_1x4k --batch 1 --ctx 4096
f16_1x16k --batch 1 --ctx 16384
f16_1x32k --batch 1 --ctx 32768
f16_1x128k --batch 1 --ctx 131072
f16_4x8k --batch 4 --ctx 8192
f16_8x32k --batch 8 --ctx 32768
f16_16x8k --batch 16 --ctx 8192
f16_1x128k_h32 --batch 1 --ctx 131072 --kv-heads 32
f16_64x4k --batch 64 --ctx 4096
f16_64x32k --batch 64 --ctx 32768
d256_16x8k --batch 16 --ctx 8192 --head-dim 256
fp8_64x32k --batch 64 --ctx 32768 --kv-dtype fp8
fp8_1x32k --batch 1 --ctx 32768 --kv-dtype fp8
bf16_causal4 --batch 16 --ctx 8192 --q-len 4 --causal --dtype bf16
portable_1x32k --batch 1 --ctx 32768
portable_64x4k --batch 64 --ctx 4096
'
while read -r name args; do
  [ -z "$name" ] && continue
  if [[ $name == portable* ]]; then export CLATTN_PORTABLE=1; else unset CLATTN_PORTABLE; fi
  for r in 1 2; do for b in $O $N; do echo "$name $(basename $b) $(d $b "" $H $args)"; done; done
done <<< "${LIST:-$ALL}" | tee $OUT/time.txt
unset CLATTN_PORTABLE
[ -n "$NO_SWEEP" ] && exit 0
echo "== sweep (new)"
for nb in ${NBLKS:-1 2}; do
  tf=decode_merge_last=128,decode_mma_blocks=$nb
  for ctx in 4096 16384 32768; do for s in ${SPLITS:-8 16 24 32}; do
    echo "1x$ctx s$s nblk$nb $(d $N $tf $H --batch 1 --ctx $ctx --splits $s)"
  done; done
  for s in 8 16 32; do echo "4x8k s$s nblk$nb $(d $N $tf $H --batch 4 --ctx 8192 --splits $s)"; done
  for s in 2 3 4 6; do echo "16x8k s$s nblk$nb $(d $N $tf $H --batch 16 --ctx 8192 --splits $s)"; done
done | tee $OUT/sweep.txt
