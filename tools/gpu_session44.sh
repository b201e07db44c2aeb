# Session 44's GPU calls: `bash tools/gpu_session44.sh [roles]` then, for the tables,
# `bash tools/gpu_session43.sh table rr`.
# roles: the portable decode's two halves (decode_port_roles=1), the CLI's checks with them, then
#   tools/sweeps/session44a.txt (REPEAT=10, two rounds; register counts with REGS=1).
# Results: tools/PERF.md session 44.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-roles}
C=./build-gpubin/new/clattn
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
if part roles; then
  printf "decode_port_roles=1\n" > /tmp/roles.txt
  printf "decode_port_roles=1\ndecode_port_waves=6\n" > /tmp/roles_w6.txt
  printf "decode_port_roles=1\ndecode_wg=128\n" > /tmp/roles_wg128.txt
  printf "decode_port_roles=1\ndecode_quant_value_rows=16\n" > /tmp/roles_vuq16.txt
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/rolecheck.txt
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/roles.txt --batch 4 --ctx 7000 --kv-dtype int4g4 --head-dim 96 --paged --page-size 16
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/roles.txt --batch 4 --ctx 7000 --kv-dtype fp8 --head-dim 256 --lse
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/roles.txt --batch 3 --ctx 5000 --head-dim 128 --causal --q-len 3
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/roles_w6.txt --batch 3 --ctx 5000 --kv-dtype int4 --head-dim 128
SHAPES
  OUT=$OUT/ab1 REPEAT=${REPEAT:-10} timeout ${AB_S:-330} bash tools/gpu_ab_cl.sh tools/sweeps/session44a.txt
fi
true
