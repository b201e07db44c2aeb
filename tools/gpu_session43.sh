# Session 43's GPU calls: `bash tools/gpu_session43.sh [roles|table|rr]...` (default: roles table rr).
# roles: the portable decode's two halves (decode_port_roles=1, cl/decode_portable.clh): the CLI's checks
#   with CLATTN_PORTABLE=1, then tools/sweeps/session43a.txt (register counts: tools/check_nvptx.py offline);
# table, rr: issue #20's and #21's tables, as tools/gpu_session42.sh's.
# Results: tools/PERF.md session 43.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-roles table rr}
C=./build-gpubin/new/clattn
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
if part roles; then
  printf "decode_port_roles=1\n" > /tmp/roles.txt
  printf "decode_port_roles=1\ndecode_quant_value_rows=16\n" > /tmp/roles_vuq16.txt
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/rolecheck.txt
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/roles.txt --batch 4 --ctx 7000 --kv-dtype int4g4 --head-dim 96 --paged --page-size 16
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/roles.txt --batch 4 --ctx 7000 --kv-dtype fp8 --head-dim 256 --lse
SHAPES
  OUT=$OUT/ab1 REPEAT=${REPEAT:-10} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session43a.txt
fi
part table && OUT=$OUT bash tools/gpu_session42.sh table
part rr && OUT=$OUT bash tools/gpu_session42.sh rr
true
