#!/bin/bash
# On the H200 (device tool): an A/B of kernel sources in one call. Lines of
# "name | kernel dir | CLATTN_BUILD_OPTIONS or - | env (k=v,...) or - | clattn run flags"
# (the flags of `clattn run decode` unless they start with another operation)
# from the file $1, each run twice interleaved; prints the median time (ms),
# for ReRoPE the forward's and the backward's and the kernels named. The
# kernel dirs travel with the tree (e.g. an untracked copy of HEAD's cl/).
# With REGS=1, each line's kernels are built once more with -cl-nv-verbose
# and their register counts (NVIDIA's compiler log) printed.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpubin/new
mapfile -t L < <(grep -v '^#' "$1" | grep -v '^ *$')
run() { # dir, options, env, args
  env CLATTN_TUNING_FILE=/dev/null $(echo $3 | tr "," " ") CLATTN_KERNEL_DIR=$PWD/$1 \
    CLATTN_BUILD_OPTIONS="$2" $B/clattn run $4 --repeat ${REPEAT:-20} --no-check 2>&1
}
fields() { # the line's fields, - as empty, the operation named
  IFS='|' read -r name dir bo envs args <<< "$1"
  dir=$(echo $dir); bo=$(echo $bo); envs=$(echo $envs)
  [ "$bo" = - ] && bo=
  [ "$envs" = - ] && envs=
  case $(echo $args | cut -d' ' -f1) in decode|merge|rerope|kvcache) ;; *) args="decode $args" ;; esac
}
for r in 1 2; do
  for line in "${L[@]}"; do
    fields "$line"
    t=$(run "$dir" "$bo" "$envs" "$args" |
        sed -n -e 's/^time: \([0-9.]*\) ms.*/\1/p' -e 's/^  \(forward\|backward\) *\([0-9.]*\) ms.*/\1 \2/p' \
            -e 's/.*\(kernels:.*\)/\1/p' -e 's/.*\(error.*\)/\1/p' | head -4 | tr '\n' ' ')
    echo "r$r $name | $t"
  done
done | tee $OUT/ab.txt
if [ -n "$REGS" ]; then
  for line in "${L[@]}"; do
    fields "$line"
    echo "== $name"
    CLATTN_CACHE_DIR=/tmp/regs-$RANDOM CLATTN_LOG=debug REPEAT=1 run "$dir" "$bo -cl-nv-verbose" "$envs" "$args" |
      grep -i -E "registers|spill|Compiling entry" | sort | uniq -c | head -20
  done | tee $OUT/regs.txt
fi
