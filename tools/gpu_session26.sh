#!/bin/bash
# Session 26's second call (device tool): the portable decode suite on the
# H200 with its failures shown, then issue #20's table.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpubin/new
CLATTN_PORTABLE=1 $B/test_decode > /tmp/tp.txt 2>&1; echo "portable test_decode rc=$?"
grep -E "asserts|FAIL|Test:.*failed|want|error" /tmp/tp.txt | grep -v "passed$" | head -40
grep -B3 "failed" /tmp/tp.txt | head -40
python3 tools/decode_vs_torch.py --clattn $B/clattn > $OUT/table.txt 2>&1; tail -30 $OUT/table.txt
