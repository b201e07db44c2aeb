# Session 40's GPU calls: `bash tools/gpu_session40.sh [fchain]...` (default: fchain) (other parts: tools/gpu_session39.sh).
# fchain: the portable decode's score pass as FMA chains (tools/sweeps/session40a.txt, against
#   tools/exp/cl_s39 = 0be789c's cl/, made here where git is at hand), the CLI's checks first,
#   NVIDIA's register counts (REGS=1).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-fchain}
C=./build-gpubin/new/clattn
if part fchain; then
  if [ ! -d tools/exp/cl_s39 ]; then
    mkdir -p tools/exp/cl_s39 && git archive 0be789c cl | tar -x -C tools/exp/cl_s39 --strip-components=1
  fi
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/fccheck.txt
CLATTN_PORTABLE=1 --batch 4 --ctx 8192 --lse
CLATTN_PORTABLE=1 --batch 2 --ctx 5000 --kv-dtype int4 --paged
CLATTN_PORTABLE=1 --batch 2 --ctx 5000 --kv-dtype int4g4 --splits 3
CLATTN_PORTABLE=1 --batch 2 --ctx 5000 --kv-dtype fp8 --q-len 3 --causal
CLATTN_PORTABLE=1 --batch 2 --ctx 3000 --head-dim 80 --bias --varlen
SHAPES
  OUT=$OUT/ab12 REGS=1 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session40a.txt
fi
true
