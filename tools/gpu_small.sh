#!/bin/bash
# On the H200 (device tool): small-batch decode (issue #20) over split counts
# and tuning choices, with the last kernel's own start-to-end beside the
# tick-to-end time, then torch SDPA on the same shapes. Logs under $OUT.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
C=${C:-build-gpubin/new/clattn}
H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 30 --no-check"
r() { local tf=$1; shift
  printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt
  printf '%-44s %-28s ' "$*" "$tf"
  CLATTN_TUNING_FILE=/tmp/t.txt $C run decode $H "$@" 2>&1 |
    sed -n -e 's/^kernel: //p' -e 's/^time: \([0-9.]*\) ms.*/\1/p' -e 's/^last kernel: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '
  echo; }
{
r "" --batch 1 --ctx 64
r "" --batch 1 --ctx 16
for ctx in 4096 16384 32768; do
  r "" --batch 1 --ctx $ctx
  for s in 8 16 32 64; do
    r "decode_merge_last=128" --batch 1 --ctx $ctx --splits $s
  done
  r "decode_merge_last=0" --batch 1 --ctx $ctx
  r "decode_mma_small_wg=128" --batch 1 --ctx $ctx
  r "decode_mma_small_wg=0" --batch 1 --ctx $ctx
  r "decode_mma_blocks=2" --batch 1 --ctx $ctx
  r "decode_mma_blocks=2,decode_merge_last=128" --batch 1 --ctx $ctx --splits 32
  r "decode_mma_small_wg=128,decode_merge_last=128" --batch 1 --ctx $ctx --splits 32
done
r "" --batch 4 --ctx 8192
r "decode_merge_last=128" --batch 4 --ctx 8192 --splits 16
r "decode_mma_small_wg=0" --batch 4 --ctx 8192
} 2>&1 | tee $OUT/small.txt
python3 tools/decode_vs_torch.py --clattn $C --shape 1/32/8/4096 --shape 1/32/8/16384 --shape 1/32/8/32768 \
  --shape 4/32/8/8192 2>&1 | tee $OUT/torch.txt
