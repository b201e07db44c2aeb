#!/bin/bash
# On the H200 (device tool), one call: the decode split rule A/B in one
# binary (build-gpubin/new): decode_mma_warps_per_cu=0 (the split target of
# 2 groups per SM, rounded up) against the row's count (the groups the SMs
# hold at once, lib/decode_plan.c mma_resident), interleaved, at the shapes
# whose split count it changes. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
N=./build-gpubin/new
d() { local tf=$1; shift
  printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt
  CLATTN_TUNING_FILE=/tmp/t.txt $N/clattn run decode "$@" --repeat 30 --no-check 2>&1 |
    sed -n -e 's/^kernel: tensor cores, //p' -e 's/^time: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
H="--heads 32 --dtype f16"
while read -r name args; do
  [ -z "$name" ] && continue
  for r in 1 2; do for tf in decode_mma_warps_per_cu=0 ""; do echo "$name [${tf:-row}] $(d "$tf" $H $args)"; done; done
done <<'L' | tee $OUT/split_ab.txt
1x4k --kv-heads 8 --batch 1 --ctx 4096
4x8k --kv-heads 8 --batch 4 --ctx 8192
4x32k --kv-heads 8 --batch 4 --ctx 32768
8x32k --kv-heads 8 --batch 8 --ctx 32768
16x8k --kv-heads 8 --batch 16 --ctx 8192
1x128k_h32 --kv-heads 32 --batch 1 --ctx 131072
64x32k --kv-heads 8 --batch 64 --ctx 32768
d80_16x8k --kv-heads 8 --batch 16 --ctx 8192 --head-dim 80
d96_16x8k --kv-heads 8 --batch 16 --ctx 8192 --head-dim 96
d112_16x8k --kv-heads 8 --batch 16 --ctx 8192 --head-dim 112
d160_16x8k --kv-heads 8 --batch 16 --ctx 8192 --head-dim 160
d192_16x8k --kv-heads 8 --batch 16 --ctx 8192 --head-dim 192
d256_16x8k --kv-heads 8 --batch 16 --ctx 8192 --head-dim 256
d256_8x8k --kv-heads 8 --batch 8 --ctx 8192 --head-dim 256
mq4c_16x8k --kv-heads 8 --batch 16 --ctx 8192 --q-len 4 --causal
mq2c_16x8k --kv-heads 8 --batch 16 --ctx 8192 --q-len 2 --causal
fp8_16x8k --kv-heads 8 --batch 16 --ctx 8192 --kv-dtype fp8
fp8_1x32k --kv-heads 8 --batch 1 --ctx 32768 --kv-dtype fp8
bf16p_16x8k --kv-heads 8 --batch 16 --ctx 8192 --dtype bf16 --paged --page-size 16
int4g4_16x8k --kv-heads 8 --batch 16 --ctx 8192 --kv-dtype int4g4
L
