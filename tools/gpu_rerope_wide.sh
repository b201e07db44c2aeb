#!/bin/sh
# One device call for the tensor-core backward of wide heads (issue #21):
# ptxas's registers for the wide variants, the ReRoPE suite on the H200
# (native, then CLATTN_PORTABLE=1), full checks of wide heads against the
# double reference, then the timings beside torch SDPA (tools/rerope_vs_torch.py)
# and the portable D=128 backward it replaces.
# Usage (device tool, carry .debs build-gpubin): sh tools/gpu_rerope_wide.sh
. tools/gpu_env.sh
B=${B:-build-gpubin/new}
C="$B/clattn run rerope"
echo "== registers (ptxas through -cl-nv-verbose)"
CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose $C --heads 4 --n 256 --head-dim 128 --window 64 \
  --dtype f16 --causal --backward --repeat 1 2>&1 | grep -E "NSL|registers|spill" | head -12
echo "== test_rerope, native"
$B/test_rerope 2>&1 | tail -4
echo "== test_rerope, CLATTN_PORTABLE=1"
CLATTN_PORTABLE=1 $B/test_rerope 2>&1 | tail -4
echo "== full checks, wide heads"
for d in 80 96 128 192 256; do
  $C --heads 4 --kv-heads 2 --n 700 --n-k 777 --head-dim $d --window 200 --dtype f16 --causal --backward --repeat 2 | grep -E "kernels|check|FAIL"
done
$C --heads 4 --n 600 --head-dim 128 --window 1000 --dtype bf16 --backward --repeat 2 | grep -E "kernels|check|FAIL"
echo "== columns per work-group (rerope_bwd_cols), causal W = N/4"
for dc in 128:64 128:128 256:128 256:256; do
  d=${dc%:*} c=${dc#*:} n=8192
  [ "$d" = 256 ] && n=4096
  echo "rerope_bwd_cols=$c" > /tmp/cols$c.txt
  echo "-- D=$d N=$n cols=$c"
  CLATTN_TUNING_FILE=/tmp/cols$c.txt $C --z 1 --heads 32 --n $n --head-dim $d --window $((n / 4)) \
    --dtype f16 --causal --backward --repeat 5 --no-check | grep -E "backward "
done
echo "== side by side"
python3 tools/rerope_vs_torch.py --clattn $B/clattn --repeat 10
python3 tools/rerope_vs_torch.py --clattn $B/clattn --repeat 10 --shape 1/32/8192/96/2048/causal \
  --shape 1/32/8192/192/2048/causal | tail -2
echo "== the portable D=128 backward (what ran before)"
CLATTN_PORTABLE=1 $C --z 1 --heads 32 --n 8192 --head-dim 128 --window 2048 --dtype f16 --causal --backward --repeat 2 --no-check
