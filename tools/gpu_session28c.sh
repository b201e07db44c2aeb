# The two-phase backward as planned, checked (CLI full checks, the ReRoPE suite), timed against
# other tiles and the one-pass kernels, then beside torch SDPA. Written in session 28 and not run
# to the end there (its first run found NVIDIA's compiler refusing a variadic macro, a81411b; the
# device was not lent again): the next session's first call.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf 'rerope_bwd_qring=1\n' > /tmp/nr.txt
printf 'rerope_bwd_qring=2\n' > /tmp/qr2.txt
printf 'rerope_bwd_block_m=64\nrerope_bwd_block_n=64\n' > /tmp/t64.txt
printf 'rerope_bwd_block_m=16\n' > /tmp/bm16.txt
printf 'rerope_bwd_block_m=64\nrerope_bwd_block_n=32\n' > /tmp/bn32.txt
printf 'rerope_bwd_stages=1\n' > /tmp/s1.txt
printf 'rerope_bwd_phases=1\n' > /tmp/p1.txt
C="./build-gpubin/new/clattn run rerope"
{
for dt in f16 bf16; do
  $C --heads 4 --n 777 --head-dim 128 --window 200 --dtype $dt --causal --backward --repeat 2
  $C --heads 4 --kv-heads 2 --n 500 --n-k 600 --head-dim 96 --window 150 --dtype $dt --backward --repeat 2
  $C --heads 4 --kv-heads 1 --n 700 --head-dim 64 --window 150 --dtype $dt --causal --backward --repeat 2
  $C --heads 4 --n 600 --head-dim 128 --window 100 --dtype $dt --causal --backward --on-the-fly --repeat 2
  $C --heads 4 --n 600 --head-dim 64 --window 100 --dtype $dt --backward --on-the-fly --interleaved --repeat 2
done
} 2>&1 | grep -E 'kernels|check|FAIL|error' > $OUT/checks.txt
echo "checks failed: $(grep -c FAILED $OUT/checks.txt)"; grep -E 'FAIL|error' $OUT/checks.txt | head
timeout 200 ./build-gpubin/new/test_rerope > $OUT/test_rerope.txt 2>&1; echo "test_rerope rc=$?"; grep -A4 'Run Summary' $OUT/test_rerope.txt
REPEAT=${REPEAT:-3} bash tools/gpu_ab_cl.sh tools/sweeps/rr_phased3.txt
timeout 240 python3 tools/rerope_vs_torch.py --clattn build-gpubin/new/clattn 2>&1 | tee $OUT/vs_torch.txt | tail -20
