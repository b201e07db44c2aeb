# Session 37's GPU calls: `bash tools/gpu_session37.sh [floor|torch|check|rr|rrab|rrab2|merge|mlast|tmax|dvovl|tune|ptune]...`
# (default: floor torch check rr; IF_H200="parts" adds those parts where the GPU is an H200).
# floor: tools/launch_floor.c (empty kernels held by a user event or behind a spinning kernel);
# torch: issue #20's table (tools/decode_vs_torch.py), the CLI's new hold, 8-warp padded groups;
# check: the padded head dims' 8-warp groups natively (`clattn run decode --check` at D = 80 /
#   96 / 112, and the tests' padded-dims cases), which session 36 timed with --no-check only;
# rr: issue #21's table (tools/rerope_vs_torch.py, as tools/gpu_session35.sh rr);
# rrab: the CLI's checks of dk/dv's ring with the keys in local memory (rerope_bwd_qring=3,
#   commit ab0bc4a; removed after this call: no gain, tools/PERF.md session 37), then
#   tools/sweeps/session37.txt (that ring against the plan's forms; B=1 decode's blocks in flight);
# rrab2: tools/sweeps/session37b.txt (dk/dv's ring with the keys' fragments in registers at D = 64);
# merge: the split-K merge in one round of loads (tools/sweeps/session37c.txt, with
#   tools/exp/cl_old, carried: HEAD's cl/ before it), after the CLI's checks;
# mlast: where the one-launch merge's time goes (tools/sweeps/session37d.txt, tools/exp/cl_ml carried);
# tmax (not run in session 37: no device time left): the one-launch merge's tickets raised by
#   atom_max first (decode_merge_last_max=1): the driver's int64 atomics, the CLI's checks, the
#   tests' one-launch cases natively (every other one with atom_max), tools/sweeps/session37e.txt;
# dvovl (prepared, not run): dk/dv's dv chain left running while dS forms (tools/sweeps/session37f.txt,
#   the checks first; tools/exp/cl_dv from tools/sweeps/session37f.patch);
# tune / ptune: `clattn tune --family decode`, native / portable (tools/gpu_session33.sh).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-floor torch check rr}
printf 'rerope_bwd_qring=3\n' > /tmp/qr3.txt
printf 'rerope_bwd_qring=3\nrerope_bwd_block_m=64\n' > /tmp/qr3bm64.txt
printf 'rerope_bwd_qring=3\nrerope_bwd_block_m=16\n' > /tmp/qr3bm16.txt
printf 'decode_mma_small_blocks=3\n' > /tmp/sb3.txt; printf 'decode_mma_small_blocks=4\n' > /tmp/sb4.txt
printf 'rerope_bwd_qring=2\n' > /tmp/qr2.txt; printf 'rerope_bwd_qring=2\nrerope_bwd_block_m=16\n' > /tmp/qr2bm16.txt
printf 'rerope_bwd_qring=2\nrerope_wgmma_maxnreg=0\n' > /tmp/qr2cap0.txt
printf 'decode_merge_last=8\ndecode_merge_last_max=0\n' > /tmp/old8.txt # session 37's NVIDIA row (the sweeps' HEAD lines)
printf 'decode_merge_last=0\n' > /tmp/ml0.txt; printf 'decode_merge_last=16\ndecode_merge_last_max=0\n' > /tmp/ml16.txt
printf 'decode_merge_last=16\ndecode_merge_last_max=1\n' > /tmp/ml16max.txt; printf 'decode_merge_last=8\ndecode_merge_last_max=1\n' > /tmp/max1.txt
C=./build-gpubin/new/clattn
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
echo "profilers: $(which ncu nsys 2>/dev/null | tr '\n' ' ')" | tee -a $OUT/gpu.txt
if grep -q H200 $OUT/gpu.txt && [ -n "$IF_H200" ]; then PARTS="$PARTS $IF_H200"; fi # the tables where an H200 came
part floor && ./build-gpubin/new/launch_floor NVIDIA 100 2>&1 | tee $OUT/floor.txt
part torch && PYTHONUNBUFFERED=1 timeout ${TORCH_S:-200} python3 tools/decode_vs_torch.py \
  --clattn $C --repeat 20 2>&1 | tee $OUT/decode_vs_torch.txt
if part check; then
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_X=0 --batch 16 --ctx 8192 --head-dim 80
CLATTN_X=0 --batch 16 --ctx 8192 --head-dim 80 --dtype bf16
CLATTN_X=0 --batch 16 --ctx 8192 --head-dim 96 --paged --page-size 16
CLATTN_X=0 --batch 16 --ctx 8192 --head-dim 112 --varlen --bias
CLATTN_X=0 --batch 4 --ctx 8192 --head-dim 80 --q-len 3 --causal --lse
CLATTN_X=0 --batch 64 --ctx 4096 --head-dim 112 --dtype bf16 --paged
CLATTN_X=0 --batch 1 --ctx 16384 --head-dim 80
SHAPES
  CLATTN_TEST_ONLY="padded head dims" timeout 150 ./build-gpubin/new/test_decode 2>&1 | grep -E "FAIL|asserts|got"
fi 2>&1 | tee $OUT/check.txt
part rr && PYTHONUNBUFFERED=1 timeout 200 python3 tools/rerope_vs_torch.py --clattn $C --repeat 5 \
  --seed-bwd-max-d 64 --shape 1/32/8192/64/2048/causal --shape 1/32/8192/64/2048 \
  --shape 1/32/8192/128/2048/causal --shape 1/32/8192/128/8192/causal 2>&1 | tee $OUT/rerope_vs_torch.txt
if part rrab; then
  for f in /tmp/qr3.txt /tmp/qr3bm64.txt; do
    for a in "--head-dim 64 --causal" "--head-dim 64" "--head-dim 128 --causal" "--head-dim 64 --causal --dtype bf16" \
             "--head-dim 96 --causal --kv-heads 2"; do
      echo "== $f $a: $(CLATTN_TUNING_FILE=$f timeout 120 $C run rerope --heads 4 --n 700 --window 300 --backward \
        --repeat 1 $a 2>&1 | grep -E 'kernels|FAIL|rror|check dq1' | tr '\n' ' ')"
    done
  done 2>&1 | tee $OUT/rrcheck.txt
  for t in "backward in two phases" "backward on warpgroup MMA"; do
    CLATTN_TEST_ONLY="$t" timeout 150 ./build-gpubin/new/test_rerope 2>&1 | grep -E "FAIL|asserts|got" | head -5
  done 2>&1 | tee -a $OUT/rrcheck.txt
  OUT=$OUT/ab REPEAT=${REPEAT:-5} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session37.txt
fi
if part rrab2; then
  for a in "--head-dim 64 --causal" "--head-dim 64 --kv-heads 2"; do
    echo "== qr2 $a: $(CLATTN_TUNING_FILE=/tmp/qr2.txt timeout 120 $C run rerope --heads 4 --n 700 --window 300 \
      --backward --repeat 1 $a 2>&1 | grep -E 'kernels|FAIL|rror|check dq1' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/rrcheck2.txt
  OUT=$OUT/ab2 REPEAT=${REPEAT:-5} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session37b.txt
fi
if part merge; then
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_X=0 --batch 1 --ctx 16384 --lse
CLATTN_X=0 --batch 1 --ctx 16384 --splits 3 --q-len 2 --causal
CLATTN_TUNING_FILE=/tmp/ml0.txt --batch 2 --ctx 4096 --varlen --lse
CLATTN_X=0 --batch 1 --ctx 4096 --splits 40
SHAPES
  OUT=$OUT/ab3 REPEAT=${REPEAT:-20} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session37c.txt
fi 2>&1 | tee $OUT/merge.txt
part mlast && exp_cl cl_ml 81b8fb6 tools/sweeps/session37d.patch # 81b8fb6's cl/ with the experiment macros
part mlast && strings /usr/local/nvidia/lib64/libnvidia-opencl.so.1 | grep -o 'cl_khr_int64_[a-z_]*' | sort -u | tee $OUT/int64.txt
part mlast && OUT=$OUT/ab4 REPEAT=${REPEAT:-20} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session37d.txt
if part tmax; then
  strings /usr/local/nvidia/lib64/libnvidia-opencl.so.1 | grep -o 'cl_khr_int64_[a-z_]*' | sort -u | tr '\n' ' '; echo
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_TUNING_FILE=/tmp/ml16max.txt --batch 1 --ctx 16384 --lse
CLATTN_TUNING_FILE=/tmp/max1.txt --batch 4 --ctx 8192 --q-len 3 --causal --lse
CLATTN_TUNING_FILE=/tmp/max1.txt --batch 3 --ctx 5000 --varlen --paged
SHAPES
  CLATTN_TEST_ONLY="one-launch" timeout 60 ./build-gpubin/new/test_decode 2>&1 | grep -E "FAIL|asserts"
  OUT=$OUT/ab5 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session37e.txt
fi 2>&1 | tee $OUT/tmax.txt
if part dvovl; then # prepared, not run in session 37
  exp_cl cl_dv 16c88e3 tools/sweeps/session37f.patch
  for a in "--head-dim 64 --causal" "--head-dim 64 --kv-heads 2" "--head-dim 48 --causal --dtype bf16"; do
    echo "== dvovl $a: $(CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_dv CLATTN_BUILD_OPTIONS=-DEXP_DVOVL=1 timeout 120 \
      $C run rerope --heads 4 --n 700 --window 300 --backward --repeat 1 $a 2>&1 |
      grep -E 'kernels|FAIL|rror|check dq1' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/dvcheck.txt
  OUT=$OUT/ab6 REPEAT=${REPEAT:-5} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session37f.txt
fi
for p in tune ptune; do
  part $p && OUT=$OUT bash tools/gpu_session33.sh $p
done
true
