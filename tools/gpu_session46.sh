# Session 46's GPU calls: `bash tools/gpu_session46.sh [first|b1|lds|tune|ptune]...` (default: first).
# first: issue #20's and #21's tables (tools/gpu_session42.sh table rr), issue #22's portable figures
#   with the halves and K a tile ahead beside them (tools/sweeps/session46p.txt, REPEAT=10, two
#   rounds), then NVIDIA's own PTX of the portable decode (tools/gpu_session45.sh ptx).
# b1: the portable decode at B=1 ctx=32768: split targets, the one-launch merge's limit, the halves
#   (tools/sweeps/session46b.txt, REPEAT=20, two rounds).
# lds: the portable decode's q in 16-byte local loads (tools/sweeps/session46_lds.patch, not
#   timed yet) against the tree's: the CLI's checks with it, then tools/sweeps/session46c.txt
#   (REPEAT=10, two rounds), then its NVIDIA PTX's shared loads and registers.
# tune / ptune: `clattn tune --family decode`, native / portable (tools/gpu_session33.sh's parts).
# Results: tools/PERF.md session 46.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-first}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
# the sweeps' and checks' tuning files, /tmp/NAME.txt, one key=value a line
tf() { local n=$1; shift; printf '%s\n' "$@" > /tmp/$n.txt; }
tf roles decode_port_roles=1; tf kp decode_port_kpre=1; tf kqw2 decode_kq_wide=2
tf kp128w3 decode_port_kpre=1 decode_wg=128 decode_port_waves=3
tf s1 decode_splits_per_cu=1; tf s4 decode_splits_per_cu=4; tf s8 decode_splits_per_cu=8
tf wg128 decode_wg=128; tf ml32 decode_merge_last=32; tf ml0 decode_merge_last=0
tf roles_s1 decode_port_roles=1 decode_splits_per_cu=1; tf roles_s4 decode_port_roles=1 decode_splits_per_cu=4
tf roles_ml32 decode_port_roles=1 decode_merge_last=32
tf kp128w3_ml32 decode_port_kpre=1 decode_wg=128 decode_port_waves=3 decode_merge_last=32
tf lanes decode_lane_keys=1; tf kst decode_kstage=1 decode_kstage_quant=1
if part first; then
  OUT=$OUT bash tools/gpu_session42.sh table rr
  OUT=$OUT/port REPEAT=10 timeout ${AB_S:-280} bash tools/gpu_ab_cl.sh tools/sweeps/session46p.txt
  OUT=$OUT/ptx bash tools/gpu_session45.sh ptx
fi
if part b1; then
  OUT=$OUT/b1 REPEAT=20 timeout ${AB_S:-120} bash tools/gpu_ab_cl.sh tools/sweeps/session46b.txt
fi
if part lds; then
  exp_cl cl_lds a4506b7 tools/sweeps/session46_lds.patch
  L=CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_lds,CLATTN_PORTABLE=1
  C=./build-gpubin/new/clattn bash tools/gpu_checks.sh <<SHAPES | tee $OUT/ldscheck.txt
$L --batch 3 --ctx 5000 --head-dim 128 --causal --q-len 3 --lse
$L --batch 4 --ctx 7000 --head-dim 96 --dtype bf16 --paged --page-size 16 --varlen --bias
$L --batch 4 --ctx 7000 --kv-dtype int4 --paged --page-size 16 --q-len 2 --causal
$L --batch 4 --ctx 7000 --kv-dtype fp8 --head-dim 256 --lse
$L --batch 2 --ctx 6000 --kv-dtype int4g4 --head-dim 128 --splits 3
$L,CLATTN_TUNING_FILE=/tmp/lanes.txt --batch 3 --ctx 5000 --head-dim 128 --q-len 2 --causal
$L,CLATTN_TUNING_FILE=/tmp/kst.txt --batch 3 --ctx 5000 --head-dim 64 --kv-dtype int4
$L,CLATTN_TUNING_FILE=/tmp/roles.txt --batch 2 --ctx 9000 --head-dim 128 --bias
$L,CLATTN_TUNING_FILE=/tmp/kp.txt --batch 2 --ctx 9000 --head-dim 80 --lse
SHAPES
  OUT=$OUT/lds REPEAT=10 timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session46c.txt
  mkdir -p $OUT/ldsptx; CLATTN_CACHE_DIR=$OUT/ldsptx CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_lds CLATTN_PORTABLE=1 \
    CLATTN_TUNING_FILE=/dev/null CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose timeout 60 ./build-gpubin/new/clattn run decode --heads 32 --kv-heads 8 \
    --batch 64 --ctx 4096 --repeat 3 --no-check > $OUT/ldsptx/log.txt 2>&1
  echo "== NVIDIA's PTX: $(cat $OUT/ldsptx/*.bin | grep -a -o 'ld.shared[a-z0-9.]*' | sort | uniq -c | tr '\n' ' ')" \
    "$(grep -E 'registers|spill' $OUT/ldsptx/log.txt | sort | uniq -c | tr '\n' ' ')" | tee $OUT/ldsptx.txt
fi
for p in tune ptune; do
  part $p && OUT=$OUT bash tools/gpu_session33.sh $p
done
true
