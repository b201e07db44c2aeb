#!/bin/bash
# On the H200 (device tool), one call: the wide groups (8 warps, one per
# SM) for short keys, decode_mma_small_short = 0 (only grids of few groups
# take them, the split target rounded up) against 1 (also where 4-warp
# groups' splits of decode_mma_min_keys cannot fill the SMs; the split
# count fills them once), one binary, interleaved, two rounds; then the
# decode suite natively. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
N=./build-gpubin/new
d() { local tf=$1; shift
  printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt
  CLATTN_TUNING_FILE=/tmp/t.txt $N/clattn run decode "$@" --repeat 30 --no-check 2>&1 |
    sed -n -e 's/^kernel: tensor cores, //p' -e 's/^kernel: //p' -e 's/^time: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
H="--heads 32 --kv-heads 8 --dtype f16"
while read -r name args; do
  [ -z "$name" ] && continue
  for r in 1 2; do for v in 0 1; do echo "$name short=$v $(d decode_mma_small_short=$v $H $args)"; done; done
done <<'L' | tee $OUT/wide_ab.txt
4x8k --batch 4 --ctx 8192
3x8k --batch 3 --ctx 8192
2x8k --batch 2 --ctx 8192
4x4k --batch 4 --ctx 4096
8x4k --batch 8 --ctx 4096
4x16k --batch 4 --ctx 16384
8x8k --batch 8 --ctx 8192
1x4k --batch 1 --ctx 4096
1x32k --batch 1 --ctx 32768
1x128k --batch 1 --ctx 131072
4x8k_bf16_paged --batch 4 --ctx 8192 --dtype bf16 --paged --page-size 16
4x8k_d64 --batch 4 --ctx 8192 --head-dim 64
4x8k_d256 --batch 4 --ctx 8192 --head-dim 256
4x8k_mq4c --batch 4 --ctx 8192 --q-len 4 --causal
L
[ -n "$NO_TESTS" ] && exit 0
timeout 240 $N/test_decode > $OUT/test_decode.txt 2>&1; echo "test_decode rc=$? $(grep -E '^ +asserts' $OUT/test_decode.txt)"
