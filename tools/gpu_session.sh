#!/bin/bash
# On the H200 (device tool), one call: `tools/gpu_session.sh suites` runs
# every suite of build-gpubin/new on the NVIDIA device (fast paths, then
# decode and ReRoPE with CLATTN_PORTABLE=1); `tools/gpu_session.sh time`
# times the decode benchmark shapes with build-gpubin/old/clattn (an earlier
# commit, its kernels embedded) and build-gpubin/new/clattn (the tree's cl/)
# interleaved, old new old new, so the ratio is taken in one call. Logs under
# $OUT. Carry .debs and build-gpubin (ignored: list it in .git/info/exclude).
# Filling build-gpubin here (static builds, so each binary runs alone):
#   meson setup build-gpu -Dbuildtype=release -Ddefault_library=static && ninja -C build-gpu
#   mkdir -p build-gpubin/new build-gpubin/old
#   strip -o build-gpubin/new/clattn build-gpu/clattn
#   for t in decode rerope kvcache merge host baseline safety cache threads; do
#     strip -o build-gpubin/new/test_$t build-gpu/tests/test_$t; done
#   git worktree add /tmp/old <commit> and the same build there, its clattn as
#   build-gpubin/old/clattn (its kernels embedded: run without CLATTN_KERNEL_DIR).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
N=./build-gpubin/new O=./build-gpubin/old
case "$1" in
suites)
  : > /tmp/summary.txt
  suite() { local name=$1 log=/tmp/suite.txt; shift
    timeout 900 "$@" > $log 2>&1
    echo "$name rc=$? $(grep -E '^ +asserts' $log)" | tee -a /tmp/summary.txt
    { echo "===== $name"; cat $log; } >> $OUT/tests.txt; }
  for t in decode rerope kvcache merge host baseline safety cache threads; do suite test_$t $N/test_$t; done
  for t in decode rerope; do suite "test_$t portable" env CLATTN_PORTABLE=1 $N/test_$t; done
  echo "== test suites"; cat /tmp/summary.txt ;;
time)
  d() { local bin=$1; shift
    local k=$([ $bin = $O ] && echo "env -u CLATTN_KERNEL_DIR CLATTN_CACHE_DIR=/tmp/cache-old" || echo env)
    $k $bin/clattn run decode "$@" --repeat 20 --no-check 2>&1 | grep -E "^time|error|FAIL" | head -2 | tr '\n' ' '; }
  H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16"
  while read -r name args; do
    for r in 1 2; do for b in $O $N; do echo "$name $(basename $b) $(d $b $H $args)"; done; done
  done <<'LIST' | tee $OUT/time.txt
f16_64x32k --batch 64 --ctx 32768
int4_64x32k --batch 64 --ctx 32768 --kv-dtype int4
fp8_64x32k --batch 64 --ctx 32768 --kv-dtype fp8
int4g4_64x32k --batch 64 --ctx 32768 --kv-dtype int4g4
int4paged_64x32k --batch 64 --ctx 32768 --kv-dtype int4 --paged --page-size 16
f16paged_64x4k --batch 64 --ctx 4096 --paged --page-size 16
f16_64x4k --batch 64 --ctx 4096
f16_1x32k --batch 1 --ctx 32768
f16_16x8k --batch 16 --ctx 8192
bf16_causal4 --batch 16 --ctx 8192 --q-len 4 --causal --dtype bf16
LIST
  ;;
esac
