#!/bin/bash
. tools/gpu_env.sh
B=./build-gpu
for cfg in "rerope_wg=128,rerope_block_n=64" "rerope_wg=256,rerope_block_n=64" "rerope_wg=128,rerope_block_n=32" "rerope_wg=192,rerope_block_n=64" "rerope_wg=64,rerope_block_n=32"; do
  echo "$cfg" | tr ',' '\n' > /tmp/tune.txt
  for c in "" --causal; do
    echo "$cfg $c: $(CLATTN_TUNING_FILE=/tmp/tune.txt $B/clattn run rerope --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype f16 $c --repeat 10 --no-check 2>&1 | grep -iE "forward|time|error" | tr '\n' ' ' | cut -c1-200)"
  done
done
