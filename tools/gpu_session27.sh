#!/bin/bash
# Session 27's first call (device tool): every suite on the H200, native and
# with CLATTN_PORTABLE=1 (issue #19's check of the refactors), then the
# portable int4 / fp8 score-pass sweep (tools/sweeps/sweep7.txt, issue #22).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpubin/new
: > $OUT/tests.txt
suite() { local name=$1; shift
  "$@" > /tmp/suite.txt 2>&1
  echo "$name rc=$? $(grep -E '^ +(tests|asserts)' /tmp/suite.txt | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  { echo "===== $name"; grep -E "FAIL|failed|Test:" /tmp/suite.txt | grep -v "passed$" | head -40; } >> $OUT/tests.txt
}
for t in decode rerope kvcache merge host baseline safety cache threads; do suite test_$t $B/test_$t; done
for t in decode rerope; do suite "test_$t portable" env CLATTN_PORTABLE=1 $B/test_$t; done
CLATTN_PORTABLE=1 bash tools/gpu_sweep.sh tools/sweeps/sweep7.txt > /dev/null 2>&1
cat $OUT/summary.txt; cat $OUT/sweep.txt
