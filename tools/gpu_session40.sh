# Session 40's GPU calls: `bash tools/gpu_session40.sh [fchain|waves]...` (default: fchain waves) (other parts: tools/gpu_session39.sh).
# fchain: the portable decode's score pass as FMA chains (tools/exp/cl_fc = fcb3dfa's cl/), then
#   quantized V's scale and shift once per key (FOLD_V, tools/exp/cl_fold = 680983c's), then int4
#   codes as 1 + c/16 (the tree's cl/), against tools/exp/cl_s39 =
#   0be789c's cl/ (tools/sweeps/session40a.txt; the copies made here where git is at hand), the
#   CLI's checks first, NVIDIA's register counts (REGS=1);
# waves: the portable decode's occupancy target (decode_port_waves, tools/sweeps/session40b.txt),
#   the CLI's checks of the capped forms first, NVIDIA's register counts (REGS=1). Needs build-gpubin
#   from 0c592c8 or later (the PTX route under CLATTN_PORTABLE=1).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-fchain waves}
C=./build-gpubin/new/clattn
if part fchain; then
  exp_cl cl_s39 0be789c && exp_cl cl_fc fcb3dfa && exp_cl cl_fold 680983c
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/fccheck.txt
CLATTN_PORTABLE=1 --batch 4 --ctx 8192 --lse
CLATTN_PORTABLE=1 --batch 2 --ctx 5000 --kv-dtype int4 --paged
CLATTN_PORTABLE=1 --batch 2 --ctx 5000 --kv-dtype int4g4 --splits 3
CLATTN_PORTABLE=1 --batch 2 --ctx 5000 --kv-dtype fp8 --q-len 3 --causal
CLATTN_PORTABLE=1 --batch 2 --ctx 3000 --head-dim 80 --bias --varlen
SHAPES
  OUT=$OUT/ab12 REGS=1 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session40a.txt
fi
if part waves; then
  for w in 4 5 6 8; do printf 'decode_port_waves=%d\n' $w > /tmp/w$w.txt; done
  printf 'decode_wg=128\ndecode_port_waves=5\n' > /tmp/wg128w5.txt
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/wavescheck.txt
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/w6.txt --batch 4 --ctx 8192 --lse
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/w8.txt --batch 2 --ctx 5000 --kv-dtype int4 --paged
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/w6.txt --batch 2 --ctx 5000 --kv-dtype fp8 --q-len 3 --causal
SHAPES
  OUT=$OUT/ab13 REGS=1 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session40b.txt
fi
true
