# Session 45's GPU calls: `bash tools/gpu_session45.sh [kpre|state]`; on an H200 also
# `bash tools/gpu_session43.sh table rr` and `TUNE_S=590 bash tools/gpu_session34.sh tune` / `ptune`.
# kpre: the portable decode's K row a tile ahead (decode_port_kpre=1): the CLI's checks with it,
#   then tools/sweeps/session45a.txt (REPEAT=10, two rounds; register counts with REGS=1).
# state: the portable kernel's state and tensors in structs (tools/sweeps/session45_state.patch) against
#   the cl/ it patches, with the halves and K a tile ahead: tools/sweeps/session45b.txt.
# ptx: NVIDIA's PTX of the portable decode (the disk cache's entries) and its compiler's verbose
#   log (registers, stack, spills) for f16, int4, fp8 and the structs' form, in $OUT/ptx_*.
# Results: tools/PERF.md session 45.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-kpre}
C=./build-gpubin/new/clattn
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
printf "decode_port_roles=1\n" > /tmp/roles.txt
printf "decode_port_kpre=1\n" > /tmp/kp.txt
if part kpre; then
  printf "decode_port_kpre=1\ndecode_wg=128\n" > /tmp/kp128.txt
  printf "decode_port_kpre=1\ndecode_wg=128\ndecode_port_waves=3\n" > /tmp/kp128w3.txt
  printf "decode_port_kpre=1\ndecode_port_waves=4\n" > /tmp/kpw4.txt
  printf "decode_kq_wide=2\n" > /tmp/kqw2.txt
  printf "decode_kq_wide=2\ndecode_port_kpre=1\n" > /tmp/kqw2kp.txt
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/kprecheck.txt
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/kp.txt --batch 3 --ctx 5000 --head-dim 128 --causal --q-len 3 --lse
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/kp128w3.txt --batch 4 --ctx 7000 --head-dim 96 --dtype bf16 --paged --page-size 16 --varlen --bias
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/kqw2kp.txt --batch 4 --ctx 7000 --kv-dtype int4 --paged --page-size 16 --q-len 2 --causal
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/kpw4.txt --batch 4 --ctx 7000 --kv-dtype fp8 --head-dim 256 --lse
CLATTN_PORTABLE=1,CLATTN_TUNING_FILE=/tmp/kp.txt --batch 2 --ctx 6000 --kv-dtype int4g4 --head-dim 128 --splits 3
SHAPES
  OUT=$OUT/ab1 REPEAT=${REPEAT:-10} timeout ${AB_S:-420} bash tools/gpu_ab_cl.sh tools/sweeps/session45a.txt
fi
part state && exp_cl cl_head 3317593 && exp_cl cl_state 3317593 tools/sweeps/session45_state.patch &&
  OUT=$OUT/ab2 REPEAT=${REPEAT:-10} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session45b.txt
if part ptx; then
  exp_cl cl_state 3317593 tools/sweeps/session45_state.patch
  for v in "f16:cl:--batch 64 --ctx 4096" "f16b1:cl:--batch 1 --ctx 32768" "int4:cl:--batch 16 --ctx 8192 --kv-dtype int4" \
           "fp8:cl:--batch 16 --ctx 8192 --kv-dtype fp8" "f16state:tools/exp/cl_state:--batch 64 --ctx 4096"; do
    IFS=: read -r name dir args <<< "$v"; mkdir -p $OUT/ptx_$name
    CLATTN_CACHE_DIR=$OUT/ptx_$name CLATTN_KERNEL_DIR=$PWD/$dir CLATTN_PORTABLE=1 CLATTN_TUNING_FILE=/dev/null \
      CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose timeout 120 $C run decode --heads 32 --kv-heads 8 \
      $args --repeat 3 --no-check > $OUT/ptx_$name/log.txt 2>&1
    echo "== $name: $(grep -iE 'registers|spill|stack|^time' $OUT/ptx_$name/log.txt | sort | uniq -c | tr '\n' ' ')"
  done 2>&1 | tee $OUT/ptx.txt
fi
true
