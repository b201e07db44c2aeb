# Session 37's GPU calls: `bash tools/gpu_session37.sh [floor|torch|check|rr|tune|ptune]...`
# (default: floor torch check rr).
# floor: tools/launch_floor.c (empty kernels held by a user event or behind a spinning kernel);
# torch: issue #20's table (tools/decode_vs_torch.py), the CLI's new hold, 8-warp padded groups;
# check: the padded head dims' 8-warp groups natively (`clattn run decode --check` at D = 80 /
#   96 / 112, and the tests' padded-dims cases), which session 36 timed with --no-check only;
# rr: issue #21's table (tools/rerope_vs_torch.py, as tools/gpu_session35.sh rr);
# tune / ptune: `clattn tune --family decode`, native / portable (tools/gpu_session33.sh).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-floor torch check rr}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
C=./build-gpubin/new/clattn
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
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
for p in tune ptune; do
  part $p && OUT=$OUT bash tools/gpu_session33.sh $p
done
true
