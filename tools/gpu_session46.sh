# Session 46's GPU calls: `bash tools/gpu_session46.sh [first|b1|tune|ptune]...` (default: first).
# first: issue #20's and #21's tables (tools/gpu_session42.sh table rr), issue #22's portable figures
#   with the halves and K a tile ahead beside them (tools/sweeps/session46p.txt, REPEAT=10, two
#   rounds), then NVIDIA's own PTX of the portable decode (tools/gpu_session45.sh ptx).
# b1: the portable decode at B=1 ctx=32768: split targets, the one-launch merge's limit, the halves
#   (tools/sweeps/session46b.txt, REPEAT=20, two rounds).
# tune / ptune: `clattn tune --family decode`, native / portable (tools/gpu_session33.sh's parts).
# Results: tools/PERF.md session 46.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-first}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
if part first; then
  OUT=$OUT bash tools/gpu_session42.sh table rr
  printf "decode_port_roles=1\n" > /tmp/roles.txt
  printf "decode_port_kpre=1\n" > /tmp/kp.txt
  printf "decode_port_kpre=1\ndecode_wg=128\ndecode_port_waves=3\n" > /tmp/kp128w3.txt
  printf "decode_kq_wide=2\n" > /tmp/kqw2.txt
  printf "decode_splits_per_cu=4\n" > /tmp/s4.txt; printf "decode_splits_per_cu=8\n" > /tmp/s8.txt
  printf "decode_wg=128\n" > /tmp/wg128.txt; printf "decode_port_roles=1\ndecode_splits_per_cu=4\n" > /tmp/roles_s4.txt
  OUT=$OUT/port REPEAT=10 timeout ${AB_S:-280} bash tools/gpu_ab_cl.sh tools/sweeps/session46p.txt
  OUT=$OUT/ptx bash tools/gpu_session45.sh ptx
fi
if part b1; then
  printf "decode_port_roles=1\n" > /tmp/roles.txt; printf "decode_splits_per_cu=1\n" > /tmp/s1.txt
  printf "decode_merge_last=32\n" > /tmp/ml32.txt; printf "decode_merge_last=0\n" > /tmp/ml0.txt
  printf "decode_port_roles=1\ndecode_splits_per_cu=1\n" > /tmp/roles_s1.txt
  printf "decode_port_roles=1\ndecode_merge_last=32\n" > /tmp/roles_ml32.txt
  printf "decode_port_kpre=1\ndecode_wg=128\ndecode_port_waves=3\ndecode_merge_last=32\n" > /tmp/kp128w3_ml32.txt
  OUT=$OUT/b1 REPEAT=20 timeout ${AB_S:-120} bash tools/gpu_ab_cl.sh tools/sweeps/session46b.txt
fi
for p in tune ptune; do
  part $p && OUT=$OUT bash tools/gpu_session33.sh $p
done
true
