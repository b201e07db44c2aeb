#!/bin/bash
# On the H200 (device tool), one call: clattn run decode over a list of
# "name | tuning overrides (comma separated, or -) | flags" lines read from
# stdin or the file $1, each run twice interleaved by line order; prints the
# kernel line and the median time. For probing a plan choice before it goes
# into a tuning row (the overrides are the keys of host/params.c).
# BINS="old new" runs each line with build-gpubin/old and build-gpubin/new
# in turn (an A/B of two builds in one call).
#   bash tools/gpu_sweep.sh sweep.txt      # logs under $OUT
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
d() { local tf=$1 N=$2; shift 2
  if [ "$tf" = - ]; then : > /tmp/t.txt; else printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt; fi
  CLATTN_TUNING_FILE=/tmp/t.txt $N/clattn run decode "$@" --repeat ${REPEAT:-30} --no-check 2>&1 |
    sed -n -e 's/^decode: .*splits \([0-9]*\).*/S\1/p' -e 's/^kernel: //p' -e 's/^time: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
mapfile -t L < <(grep -v '^#' "${1:-/dev/stdin}" | grep -v '^ *$')
for r in 1 2; do
  for line in "${L[@]}"; do
    IFS='|' read -r name tf args <<< "$line"
    for b in ${BINS:-new}; do echo "r$r $name $b | $(d $(echo $tf) ./build-gpubin/$b $args)"; done
  done
done | tee $OUT/sweep.txt
