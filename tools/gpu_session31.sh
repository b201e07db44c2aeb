# Session 31's calls: session 30's (tools/gpu_session30.sh: the warpgroup MMA checks after
# 4c6fb4e, the backward's dq ring, issue #21's table) and the portable score pass's
# quantized K rows in 16-byte loads (decode_kq_wide; tools/sweeps/portable_kq.txt, with
# REGS: ptxas's register counts), plus the portable quantized checks at D = 72 / 96 where
# PoCL had skipped the value pass (cl/decode.cl port_values).
# `bash tools/gpu_session31.sh [checks|bwd|kq|torch]...` (default: checks bwd kq).
# What follows: int4_w / fp8_w faster than int4 / fp8 -> decode_kq_wide = 1 in the GPU rows.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf 'decode_kq_wide=1\n' > /tmp/kqw.txt; printf 'decode_wg=128\n' > /tmp/wg128.txt
PARTS=${*:-checks bwd kq}
for p in checks bwd torch; do part $p && bash tools/gpu_session30.sh $p; done
if part kq; then
  for a in "--kv-dtype int4 --head-dim 72" "--kv-dtype fp8 --head-dim 96 --paged" "--kv-dtype int4g4 --head-dim 96 --causal --q-len 2"; do
    for f in /dev/null /tmp/kqw.txt; do
      CLATTN_PORTABLE=1 CLATTN_TUNING_FILE=$f ./build-gpubin/new/clattn run decode --batch 3 --heads 8 --kv-heads 2 --ctx 1000 $a --repeat 2 2>&1 | grep -E "check|rror"
    done
  done | tee $OUT/kq_checks.txt
  OUT=$OUT/kq REGS=1 REPEAT=10 timeout 240 bash tools/gpu_ab_cl.sh tools/sweeps/portable_kq.txt
fi
