. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo rerope_bwd_phases=1 > /tmp/rg.txt  # (then rerope_bwd_rows_global=1)
C="./build-gpubin/new/clattn run rerope"
{
for dt in f16 bf16; do
  $C --heads 4 --n 777 --head-dim 128 --window 200 --dtype $dt --causal --backward --repeat 2
  $C --heads 4 --kv-heads 2 --n 500 --n-k 600 --head-dim 96 --window 150 --dtype $dt --backward --repeat 2
  $C --heads 4 --n 600 --head-dim 128 --window 100 --dtype $dt --causal --backward --on-the-fly --repeat 2
  $C --heads 4 --n 600 --head-dim 80 --window 100 --dtype $dt --backward --on-the-fly --interleaved --repeat 2
done
} 2>&1 | grep -E 'kernels|check|FAIL|error' > $OUT/checks.txt
grep -c FAILED $OUT/checks.txt; grep -E 'FAIL|error' $OUT/checks.txt | head
REGS=1 REPEAT=5 bash tools/gpu_ab_cl.sh tools/sweeps/rr_phased.txt
timeout 240 ./build-gpubin/new/test_rerope > $OUT/test_rerope.txt 2>&1; echo "test_rerope rc=$?"; tail -8 $OUT/test_rerope.txt
