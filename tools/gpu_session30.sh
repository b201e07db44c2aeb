# Session 30's call: the warpgroup MMA forms' checks on the GPU after the one-stage ring
# fix (4c6fb4e; tools/gpu_session29.sh checks: the CLI's full checks and the warpgroup
# tests natively), the backward's forms timed against mma.sync
# (tools/sweeps/rr_wgmma_bwd.txt), then issue #21's table beside torch SDPA and the seed
# with the warpgroup MMA backward on (the forward on mma.sync).
# `bash tools/gpu_session30.sh [checks|bwd|torch]...`; each part has a time limit.
# Written in session 30, which got no machine (not run yet). What follows from it:
# - checks: 0 FAILED and the warpgroup test passing -> drop `.rerope_bwd_wgmma = 1` from
#   the sm_90 row (host/params.c) where b128c_wg / b64c_wg beat b128c / b64c;
# - bwd: b128c_bn32s2 (b128c_wg_bn32s2) faster than b128c (b128c_wg) -> dq's default at
#   D >= 96 becomes the ring of two tiles of 32 (lib/rerope.c plan_phased: keep two stages
#   and halve the tiles instead of one stage of 64, which since 4c6fb4e waits for its
#   copies before computing each tile).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf 'rerope_wgmma=1\nrerope_bwd_wgmma=0\n' > /tmp/bwg.txt
printf 'rerope_wgmma=1\nrerope_bwd_wgmma=0\nrerope_bwd_block_n=32\nrerope_bwd_stages=2\n' > /tmp/bwg_bn32s2.txt
printf 'rerope_bwd_block_n=32\nrerope_bwd_stages=2\n' > /tmp/bn32s2.txt
PARTS=${*:-checks bwd torch}
part checks && timeout 150 bash tools/gpu_session29.sh checks
part bwd && REGS=${REGS:-} REPEAT=${REPEAT:-5} timeout 200 bash tools/gpu_ab_cl.sh tools/sweeps/rr_wgmma_bwd.txt
part torch && CLATTN_TUNING_FILE=/tmp/bwg.txt PYTHONUNBUFFERED=1 timeout 120 python3 tools/rerope_vs_torch.py \
  --clattn build-gpubin/new/clattn --repeat 5 --seed-bwd-max-d 64 --shape 1/32/8192/64/2048/causal \
  --shape 1/32/8192/128/2048/causal --shape 1/32/8192/128/8192/causal --shape 1/32/8192/64/2048 2>&1 | tee $OUT/vs_torch.txt
