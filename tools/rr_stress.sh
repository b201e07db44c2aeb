#!/bin/bash
# ReRoPE forward + backward on random shapes through `clattn run rerope`'s full
# check against the double reference, on the tensor-core kernels (emulated off
# NVIDIA: CLATTN_FORCE_MMA=1): head dims 16..128, GQA, Nq != Nk, windows, causal
# or not, f16 / bf16, the rotary variant. Usage: tools/rr_stress.sh [count]
# [seed] [build dir]; CLATTN_TUNING_FILE picks other tiles (e.g. a file with
# rerope_bwd_qring=2, rerope_bwd_block_m=32). Prints one line per case, FAIL
# lines with the check's output; exits 1 if any failed.
count=${1:-40}; RANDOM=${2:-7}; B=${3:-build}
export CLATTN_FORCE_MMA=1
bad=0
for i in $(seq 1 "$count"); do
  ds=(16 32 48 64 80 96 112 128); d=${ds[$((RANDOM % 8))]}
  hk=$((1 + RANDOM % 2)); g=$((1 + RANDOM % 3)); h=$((hk * g))
  n=$((1 + RANDOM % 150)); nk=$((1 + RANDOM % 170)); w=$((RANDOM % 200))
  c=""; [ $((RANDOM % 2)) = 1 ] && c="--causal"
  dt=f16; [ $((RANDOM % 3)) = 0 ] && dt=bf16
  rot=""; [ $((RANDOM % 3)) = 0 ] && { rot="--on-the-fly"; [ $((RANDOM % 2)) = 1 ] && rot="$rot --interleaved"; nk=$n; }
  args="--heads $h --kv-heads $hk --n $n --n-k $nk --head-dim $d --window $w --dtype $dt $c $rot --backward --repeat 1"
  if out=$(timeout 300 "$B/clattn" run rerope $args 2>&1) && ! grep -q FAILED <<<"$out"; then
    echo "ok   $args"
  else
    bad=$((bad + 1)); echo "FAIL $args"; grep -E 'FAILED|error|kernels' <<<"$out" | head -5
  fi
done
echo "rr_stress: $((count - bad)) of $count passed"
[ $bad = 0 ]
