#!/bin/bash
# On the H200, one call: the portable decode (CLATTN_PORTABLE=1) of
# build-gpubin/old (an earlier commit, kernels embedded) and build-gpubin/new
# at decode_wg 128 and 256, interleaved, with NVIDIA's ptxas register count of
# each (-cl-nv-verbose through the debug log). Shapes: B=64 ctx=4096 / 32768.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 10 --no-check"
for wg in 128 256; do printf 'decode_wg=%s\n' $wg > /tmp/wg$wg.txt; done
for round in 1 2; do for wg in 128 256; do for b in old new; do
  k=$([ $b = old ] && echo "-u CLATTN_KERNEL_DIR CLATTN_CACHE_DIR=/tmp/cache-old" || echo "CLATTN_CACHE_DIR=/tmp/cache-new")
  for ctx in 4096 32768; do
    log=$(env $k CLATTN_PORTABLE=1 CLATTN_TUNING_FILE=/tmp/wg$wg.txt CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose \
      build-gpubin/$b/clattn run decode $H --batch 64 --ctx $ctx 2>&1)
    echo "$log" > $OUT/$b-wg$wg-$ctx-r$round.log
    echo "r$round $b wg=$wg ctx=$ctx: $(grep -E '^time' <<<"$log" | cut -c1-26) $(grep -E '^bandwidth' <<<"$log" | cut -c1-22) | $(grep -o 'Used [0-9]* registers[^,]*' <<<"$log" | sort | uniq -c | tr '\n' ' ')"
  done
done; done; done | tee $OUT/portable_regs.txt
