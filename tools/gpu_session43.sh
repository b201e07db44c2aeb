# Session 43's GPU calls: `bash tools/gpu_session43.sh [roles|table|rr]...` (default: roles table rr).
# roles: the portable decode's two halves, as tools/gpu_session44.sh's (its sweep took session 43's
#   shapes and added three; run and written up in tools/PERF.md session 44);
# table, rr: issue #20's and #21's tables, as tools/gpu_session42.sh's.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-roles table rr}
part roles && OUT=$OUT bash tools/gpu_session44.sh roles
part table && OUT=$OUT bash tools/gpu_session42.sh table
part rr && OUT=$OUT bash tools/gpu_session42.sh rr
true
