#!/bin/bash
# On the H200 (device tool): an A/B of kernel sources in one call. Lines of
# "name | kernel dir | CLATTN_BUILD_OPTIONS or - | env (k=v,...) or - | clattn run flags"
# (the flags of `clattn run decode` unless they start with another operation)
# from the file $1, each run twice interleaved; prints the median time (ms).
# The kernel dirs travel with the tree (e.g. an untracked copy of HEAD's cl/).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpubin/new
mapfile -t L < <(grep -v '^#' "$1" | grep -v '^ *$')
for r in 1 2; do
  for line in "${L[@]}"; do
    IFS='|' read -r name dir bo envs args <<< "$line"
    dir=$(echo $dir); bo=$(echo $bo); envs=$(echo $envs)
    [ "$bo" = - ] && bo=
    [ "$envs" = - ] && envs=
    case $(echo $args | cut -d' ' -f1) in decode|merge|rerope|kvcache) ;; *) args="decode $args" ;; esac
    t=$(env CLATTN_TUNING_FILE=/dev/null $(echo $envs | tr "," " ") CLATTN_KERNEL_DIR=$PWD/$dir \
        CLATTN_BUILD_OPTIONS="$bo" $B/clattn run $args --repeat ${REPEAT:-20} --no-check 2>&1 |
        sed -n -e 's/^time: \([0-9.]*\) ms.*/\1/p' -e 's/.*\(error.*\)/\1/p' | head -2 | tr '\n' ' ')
    echo "r$r $name | $t"
  done
done | tee $OUT/ab.txt
