# Session 36's GPU calls: `bash tools/gpu_session36.sh [floor|ab|ab2|torch]...` (default: ab).
# floor: tools/launch_floor.c (built on the development machine into build-gpubin/new):
#   empty kernels timed as the CLI times an operation (held by a user event or behind a
#   spinning kernel), and the launch rate;
# ab (default): tools/sweeps/session36.txt: the CLI's two holds on small decode shapes, the
#   tensor-core decode's knobs at D = 80 / 64 and int4 paged, the portable kernel's passes
#   and keys per work-item (tools/exp/cl_ph, tools/exp/cl_kpw, carried: copies of cl/ with
#   the experiment macros of the sweep's header);
# ab2: tools/sweeps/session36b.txt (8-warp groups for padded head dims; B=1 ctx=16384's splits);
# torch: issue #20's table (tools/decode_vs_torch.py: decode beside torch SDPA's cuDNN and flash).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-ab}
for kv in decode_mma_wg=64 decode_mma_wg=256 decode_mma_splits_per_cu=1 decode_mma_splits_per_cu=4 \
          decode_mma_warps_per_cu=12 decode_mma_warps_per_cu=24 decode_mma_warps_per_cu=32 \
          decode_mma_min_keys=512 decode_mma_min_keys=2048 decode_mma_blocks=2 decode_mma_wide_wg=0 \
          decode_mma_int4_groups_per_cu=2 decode_mma_int4_groups_per_cu=8 decode_mma_int4_heads=8 \
          decode_mma_int4_whole=0 decode_merge_last=0 decode_merge_last=16 decode_wg=128 decode_wg=64; do
  echo "$kv" > /tmp/k_${kv%=*}_${kv#*=}.txt
done
printf 'decode_mma_wg=256\ndecode_mma_warps_per_cu=12\n' > /tmp/k_wg256_wpc12.txt
part floor && ./build-gpubin/new/launch_floor NVIDIA 100 2>&1 | tee $OUT/floor.txt
part ab && OUT=$OUT REPEAT=${REPEAT:-20} timeout ${AB_S:-400} bash tools/gpu_ab_cl.sh ${SWEEP:-tools/sweeps/session36.txt}
part ab2 && OUT=$OUT/ab2 REPEAT=${REPEAT:-20} timeout ${AB_S:-400} bash tools/gpu_ab_cl.sh tools/sweeps/session36b.txt
part torch && PYTHONUNBUFFERED=1 timeout ${TORCH_S:-200} python3 tools/decode_vs_torch.py \
  --clattn ./build-gpubin/new/clattn --repeat 20 2>&1 | tee $OUT/decode_vs_torch.txt
true
