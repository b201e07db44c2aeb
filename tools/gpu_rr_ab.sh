#!/bin/bash
# On the H200 (device tool): an A/B of ReRoPE kernel sources in one call.
# Lines of "name | kernel dir | CLATTN_BUILD_OPTIONS or - | env (k=v,...) or - |
# clattn run rerope flags" from the file $1, each run twice interleaved;
# prints the median forward and backward times (ms). With REGS=1, each line's
# kernels are built once more with -cl-nv-verbose and their register counts
# (NVIDIA's compiler log) printed.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpubin/new
mapfile -t L < <(grep -v '^#' "$1" | grep -v '^ *$')
run() { # dir, options, env, args
  env CLATTN_TUNING_FILE=/dev/null $(echo $3 | tr "," " ") CLATTN_KERNEL_DIR=$PWD/$1 \
    CLATTN_BUILD_OPTIONS="$2" $B/clattn run rerope $4 --repeat ${REPEAT:-5} --no-check 2>&1
}
for r in 1 2; do
  for line in "${L[@]}"; do
    IFS='|' read -r name dir bo envs args <<< "$line"
    dir=$(echo $dir); bo=$(echo $bo); envs=$(echo $envs)
    [ "$bo" = - ] && bo=
    [ "$envs" = - ] && envs=
    t=$(run "$dir" "$bo" "$envs" "$args" | sed -n -e 's/^  \(forward\|backward\) *\([0-9.]*\) ms.*/\1 \2/p' \
        -e 's/.*\(error.*\)/\1/p' -e 's/.*\(kernels:.*\)/\1/p' | tr '\n' ' ')
    echo "r$r $name | $t"
  done
done | tee $OUT/rr_ab.txt
if [ -n "$REGS" ]; then
  for line in "${L[@]}"; do
    IFS='|' read -r name dir bo envs args <<< "$line"
    dir=$(echo $dir); bo=$(echo $bo); envs=$(echo $envs)
    [ "$bo" = - ] && bo=
    [ "$envs" = - ] && envs=
    echo "== $name"
    CLATTN_CACHE_DIR=/tmp/rr-regs-$RANDOM CLATTN_LOG=debug REPEAT=1 \
      run "$dir" "$bo -cl-nv-verbose" "$envs" "$args" | grep -i -E "registers|spill|Compiling entry" | sort | uniq -c | head -20
  done | tee $OUT/rr_regs.txt
fi
