#!/bin/bash
. tools/gpu_env.sh
B=./build-gpu
r() { $B/clattn run decode "$@" --heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 20 --no-check 2>&1 | grep -E "^time" | cut -c1-22; }
for kv in int4 fp8; do
  for nb in 1 2; do
    echo "decode_mma_blocks=$nb" > /tmp/tune.txt
    for d in a b; do
      echo "$kv nblk=$nb [$d] $(CLATTN_TUNING_FILE=/tmp/tune.txt CLATTN_KERNEL_DIR=$PWD/tools/exp/$d/cl r --batch 64 --ctx 32768 --kv-dtype $kv)"
    done
    echo "$kv nblk=$nb [head] $(CLATTN_TUNING_FILE=/tmp/tune.txt r --batch 64 --ctx 32768 --kv-dtype $kv)"
  done
done
