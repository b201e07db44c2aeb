#!/bin/bash
# Issue #22's PoCL yardstick on the machine at hand: decode B=8 ctx=8192 (Hq=32 Hkv=8
# D=128, f16 unless KV names other K/V dtypes) against the streaming read through
# OpenCL (tools/stream_read.c) on the same device, taken in turns, ROUNDS times,
# since a shared machine's bandwidth moves from minute to minute. Prints each
# round's GB/s and the ratio.
#   bash tools/pocl_decode_vs_stream.sh [build dir, default build] (KV="f16 int4" ROUNDS=3)
B=${1:-build}
KV=${KV:-f16}
ROUNDS=${ROUNDS:-3}
export CLATTN_DEVICE=${CLATTN_DEVICE:-Portable Computing Language}
export CLATTN_KERNEL_DIR=${CLATTN_KERNEL_DIR:-$PWD/cl}
cc -O2 -o /tmp/stream_read tools/stream_read.c -lOpenCL || exit 1
for r in $(seq "$ROUNDS"); do
  s=$(/tmp/stream_read "Portable" | grep -o '[0-9.]* GB/s' | cut -d' ' -f1)
  for kv in $KV; do
    d=$("$B/clattn" run decode --batch 8 --ctx 8192 --heads 32 --kv-heads 8 --head-dim 128 \
        --dtype f16 --kv-dtype "$kv" --repeat 7 --no-check | sed -n 's/^bandwidth: \([0-9.]*\) GB.*/\1/p')
    echo "round $r: stream $s GB/s, decode $kv $d GB/s: $(echo "$d $s" | awk '{printf "%.0f%%", 100 * $1 / $2}')"
  done
done
