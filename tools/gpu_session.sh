#!/bin/bash
# On the H200 (device tool), one call: `tools/gpu_session.sh suites` runs
# every suite of build-gpubin/new on the NVIDIA device (fast paths, then
# decode and ReRoPE with CLATTN_PORTABLE=1); `tools/gpu_session.sh time`
# times the decode benchmark shapes with build-gpubin/old/clattn (an earlier
# commit, its kernels embedded) and build-gpubin/new/clattn (the tree's cl/)
# interleaved, old new old new, so the ratio is taken in one call. Logs under
# $OUT. `time-rerope` and `time-portable` do the same for the ReRoPE
# backward and for the portable decode. Carry .debs and build-gpubin (ignored: list it in .git/info/exclude).
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
time-rerope)
  # the ReRoPE backward (and forward), old and new interleaved: Z=1 H=32 N=8192 W=2048
  r() { local bin=$1; shift
    local k=$([ $bin = $O ] && echo "env -u CLATTN_KERNEL_DIR CLATTN_CACHE_DIR=/tmp/cache-old" || echo env)
    $k $bin/clattn run rerope --z 1 --heads 32 --n 8192 --window 2048 "$@" --backward --repeat 10 \
      --no-check 2>&1 | grep -E "^  (forward|backward) |error|FAIL" | awk '{printf "%s %s  ", $1, $2}'; }
  while read -r name args; do
    for r in 1 2 3; do for b in $O $N; do echo "$name $(basename $b) $(r $b $args)"; done; done
  done <<'LIST' | tee $OUT/time_rerope.txt
d64_causal --head-dim 64 --dtype f16 --causal
d64 --head-dim 64 --dtype f16
d64_rotary --head-dim 64 --dtype f16 --causal --on-the-fly
d128_causal --head-dim 128 --dtype f16 --causal
d256_causal --head-dim 256 --dtype bf16 --causal --n 4096
LIST
  ;;
time-portable)
  # the portable decode (CLATTN_PORTABLE=1), old and new interleaved, at the
  # row's decode_wg and at 128 keys per group
  printf 'decode_wg=128\n' > /tmp/wg128.txt
  printf 'decode_kstage_quant=1\n' > /tmp/ksq.txt
  printf 'decode_lane_keys=1\n' > /tmp/lk.txt
  p() { local bin=$1 tf=$2; shift 2
    local k=$([ $bin = $O ] && echo "env -u CLATTN_KERNEL_DIR CLATTN_CACHE_DIR=/tmp/cache-old" || echo env)
    $k CLATTN_PORTABLE=1 CLATTN_TUNING_FILE=$tf $bin/clattn run decode "$@" --repeat 20 --no-check 2>&1 |
      grep -E "^time|error|FAIL" | head -2 | tr '\n' ' '; }
  H="--heads 32 --kv-heads 8 --head-dim 128 --dtype f16"
  while read -r name tf args; do
    for r in 1 2; do for b in $O $N; do echo "$name $(basename $b) $(p $b $tf $H $args)"; done; done
  done <<'LIST' | tee $OUT/time_portable.txt
f16_64x4k /none --batch 64 --ctx 4096
f16_64x32k /none --batch 64 --ctx 32768
f16_1x32k /none --batch 1 --ctx 32768
f16_64x4k_wg128 /tmp/wg128.txt --batch 64 --ctx 4096
f16_64x32k_wg128 /tmp/wg128.txt --batch 64 --ctx 32768
int4_64x32k /none --batch 64 --ctx 32768 --kv-dtype int4
int4_64x32k_kstage /tmp/ksq.txt --batch 64 --ctx 32768 --kv-dtype int4
int4_64x32k_lanes /tmp/lk.txt --batch 64 --ctx 32768 --kv-dtype int4
fp8_64x32k /none --batch 64 --ctx 32768 --kv-dtype fp8
fp8_64x32k_kstage /tmp/ksq.txt --batch 64 --ctx 32768 --kv-dtype fp8
fp8_64x32k_lanes /tmp/lk.txt --batch 64 --ctx 32768 --kv-dtype fp8
bf16paged_16x8k /none --batch 16 --ctx 8192 --dtype bf16 --paged --page-size 16 --causal --q-len 2
f16_d80_16x8k /none --batch 16 --ctx 8192 --head-dim 80
LIST
  ;;
esac
