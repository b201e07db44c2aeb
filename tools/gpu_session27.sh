#!/bin/bash
# Session 27's first call (device tool): every suite on the H200, native and
# with CLATTN_PORTABLE=1 (issue #19's check of the refactors), then the
# portable int4 / fp8 score-pass sweep (tools/sweeps/sweep7.txt, issue #22).
. tools/gpu_env.sh
. tools/gpu_suite.sh
for t in decode rerope kvcache merge host baseline safety cache threads; do suite test_$t $B/test_$t; done
for t in decode rerope; do suite "test_$t portable" env CLATTN_PORTABLE=1 $B/test_$t; done
CLATTN_PORTABLE=1 bash tools/gpu_sweep.sh tools/sweeps/sweep7.txt > /dev/null 2>&1
cat $OUT/summary.txt; cat $OUT/sweep.txt
