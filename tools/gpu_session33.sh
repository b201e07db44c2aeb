# Session 33's GPU calls. `bash tools/gpu_session33.sh
# [check|ab|tune|ptune|matrix|pad|flush|tables]...` (default: check ab). The native tuner's check found one-group int4 on tensor cores wrong at B=64
# ctx=32768 (one split of 32768 keys: the V offsets' f32 sum); check: that shape and its
# kin against the CPU reference (--check), natively, every form of reading the rows, and the
# accuracy test natively; ab: the flushed offsets' cost (tools/sweeps/int4_flush.txt);
# tune / ptune: `clattn tune --family decode` native / portable (CLATTN_PORTABLE=1);
# matrix: model-sized shapes of every K/V format and feature through `clattn run decode`'s
# check (the first and the last sequence where the whole is past --ref-limit), native and
# portable; pad: the padded head dims' score products skipped (tools/sweeps/mma_pad_scores.txt);
# flush: how often the int4 V offsets come off (tools/sweeps/int4_flush_every.txt, needs
# cl_d23/ as tools/sweeps/int4_flush.txt says); tables: issues #20, #21 and #22's figures
# in one go (decode and ReRoPE beside torch, the portable formats), about 8 minutes.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-check ab}
C=./build-gpubin/new/clattn
printf 'decode_mma_int4_heads=0\n' > /tmp/h0.txt
if part check; then
  a="decode --heads 32 --kv-heads 8 --head-dim 128 --kv-dtype int4 --repeat 1 --check"
  for s in "--batch 16 --ctx 32768" "--batch 1 --ctx 131072" "--batch 4 --ctx 32768 --page-size 16" \
           "--batch 2 --ctx 65536 --splits 1"; do
    for e in CLATTN_X=0 CLATTN_TUNING_FILE=/tmp/h0.txt; do
      echo "== $e $s: $(env $e timeout 120 $C run $a $s 2>&1 | grep -E '^kernel:|^check:|out of tol' | tr '\n' ' ')"
    done
  done
  CLATTN_TEST_ONLY="accuracy rule on tensor cores" timeout 120 ./build-gpubin/new/test_decode 2>&1 | grep -E "FAIL|asserts"
  CLATTN_TEST_ONLY=int4 timeout 120 ./build-gpubin/new/test_kvcache 2>&1 | grep -E "FAIL|asserts"
fi 2>&1 | tee $OUT/check.txt
part ab && OUT=$OUT/ab REPEAT=20 timeout 300 bash tools/gpu_ab_cl.sh tools/sweeps/int4_flush.txt
part tune && /usr/bin/time -f "wall %e s" timeout ${TUNE_S:-500} $C tune --family decode --out $OUT/tune-native.txt 2>&1 | tee $OUT/tune-native.log | tail -30
part ptune && CLATTN_PORTABLE=1 /usr/bin/time -f "wall %e s" timeout ${TUNE_S:-500} $C tune --family decode --out $OUT/tune-portable.txt 2>&1 | tee $OUT/tune-portable.log | tail -30
if part matrix; then
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_X=0 --batch 64 --ctx 32768
CLATTN_X=0 --batch 64 --ctx 32768 --dtype bf16
CLATTN_X=0 --batch 64 --ctx 32768 --kv-dtype fp8
CLATTN_X=0 --batch 16 --ctx 32768 --kv-dtype fp8fnuz --paged --page-size 16
CLATTN_X=0 --batch 64 --ctx 32768 --kv-dtype int4
CLATTN_X=0 --batch 16 --ctx 32768 --kv-dtype int4 --paged --page-size 16
CLATTN_X=0 --batch 64 --ctx 32768 --kv-dtype int4g4
CLATTN_X=0 --batch 8 --ctx 65536 --kv-dtype int4g2 --paged --page-size 32
CLATTN_X=0 --batch 16 --ctx 32768 --head-dim 256
CLATTN_X=0 --batch 16 --ctx 32768 --head-dim 80
CLATTN_X=0 --batch 16 --ctx 32768 --head-dim 96 --kv-dtype int4
CLATTN_X=0 --batch 16 --ctx 32768 --q-len 4 --causal --lse
CLATTN_X=0 --batch 16 --ctx 32768 --varlen --bias --paged
CLATTN_X=0 --batch 4 --ctx 65536 --heads 32 --kv-heads 32 --dtype bf16
CLATTN_X=0 --batch 1 --ctx 131072
CLATTN_PORTABLE=1 --batch 64 --ctx 32768
CLATTN_PORTABLE=1 --batch 64 --ctx 32768 --kv-dtype int4
CLATTN_PORTABLE=1 --batch 64 --ctx 32768 --kv-dtype fp8 --paged
CLATTN_PORTABLE=1 --batch 16 --ctx 32768 --q-len 3 --causal --kv-dtype int4g4
SHAPES
fi 2>&1 | tee $OUT/matrix.txt
part pad && OUT=$OUT/pad REPEAT=20 timeout 200 bash tools/gpu_ab_cl.sh tools/sweeps/mma_pad_scores.txt
part flush && OUT=$OUT/flush REPEAT=30 timeout 150 bash tools/gpu_ab_cl.sh tools/sweeps/int4_flush_every.txt
if part tables; then
  PYTHONUNBUFFERED=1 timeout 200 python3 tools/decode_vs_torch.py --clattn $C --repeat 20 2>&1 | tee $OUT/decode_vs_torch.txt
  PYTHONUNBUFFERED=1 timeout 150 python3 tools/rerope_vs_torch.py --clattn $C --repeat 5 --seed-bwd-max-d 64 \
    --shape 1/32/8192/64/2048/causal --shape 1/32/8192/64/2048 --shape 1/32/8192/128/2048/causal \
    --shape 1/32/8192/128/8192/causal 2>&1 | tee $OUT/rerope_vs_torch.txt
  printf 'decode_kq_wide=0\n' > /tmp/kq0.txt
  rm -rf cl_twin && cp -r cl cl_twin && sed -i 's/^#elif !QUANT_STRAIGHT \&\& CLATTN_F32_DENORM$/#elif 0/' cl_twin/quant.clh
  OUT=$OUT/port REPEAT=10 timeout 120 bash tools/gpu_ab_cl.sh tools/sweeps/portable_q31.txt
fi
true
