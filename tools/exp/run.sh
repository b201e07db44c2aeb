#!/bin/bash
. tools/gpu_env.sh
B=./build-gpu
r() { $B/clattn run decode "$@" --heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 20 --no-check 2>&1 | grep -E "^time" | cut -c1-22; }
for kv in int4 fp8; do
  for nb in 1 2 4; do
    echo "decode_mma_blocks=$nb" > /tmp/tune.txt
    for opt in "" "-DNOCVT=1" "-DNOSS=1" "-DNOCVT=1 -DNOSS=1"; do
      echo "$kv nblk=$nb [$opt] $(CLATTN_TUNING_FILE=/tmp/tune.txt CLATTN_KERNEL_DIR=$PWD/tools/exp/cl CLATTN_BUILD_OPTIONS="$opt" r --batch 64 --ctx 32768 --kv-dtype $kv)"
    done
  done
done
