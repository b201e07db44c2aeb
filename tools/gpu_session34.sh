# Session 34's GPU calls. `bash tools/gpu_session34.sh [check|ab|tables|tune|ptune]...` (default: ab).
# check: the one-launch merge (be7d717) and the V offsets at a split's end (eff5f72) through
# `clattn run decode --check` and the tests natively, portable too;
# ab: tools/sweeps/session34.txt (needs cl_d23/ and cl_vo/ as its first line says): how
# often one-group int4's V offsets come off, the offsets taken off at the end of a split,
# and the one-launch merge against two launches; tables: issues #20, #21 and #22's figures
# in one go (decode and ReRoPE beside torch, the portable formats), about 8 minutes;
# tune / ptune: `clattn tune --family decode` native / portable (CLATTN_PORTABLE=1).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-ab}
C=./build-gpubin/new/clattn
printf 'decode_mma_int4_heads=0\n' > /tmp/h0.txt
printf 'decode_merge_last=0\n' > /tmp/ml0.txt
printf "decode_merge_last=32\n" > /tmp/ml32.txt; printf "decode_merge_last=64\n" > /tmp/ml64.txt
printf 'decode_mma_int4_heads=0\ndecode_merge_last=16\n' > /tmp/h0ml16.txt
for r in ${ROUNDS:-1}; do
  part ab && OUT=$OUT/ab$r REPEAT=${REPEAT:-30} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh ${SWEEP:-tools/sweeps/session34.txt}
done
if part check; then
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_X=0 --batch 1 --ctx 4096
CLATTN_X=0 --batch 1 --ctx 4096 --splits 16
CLATTN_X=0 --batch 4 --ctx 8192 --q-len 4 --causal --lse
CLATTN_X=0 --batch 16 --ctx 8192 --head-dim 64 --varlen --bias --paged
CLATTN_X=0 --batch 16 --ctx 8192 --kv-dtype int4 --paged --page-size 16
CLATTN_X=0 --batch 16 --ctx 32768 --kv-dtype int4
CLATTN_TUNING_FILE=/tmp/h0.txt --batch 16 --ctx 32768 --kv-dtype int4
CLATTN_X=0 --batch 2 --ctx 8192 --head-dim 256 --dtype bf16 --lse
CLATTN_PORTABLE=1 --batch 1 --ctx 32768
CLATTN_PORTABLE=1 --batch 2 --ctx 8192 --kv-dtype int4 --q-len 3 --causal --lse
SHAPES
  CLATTN_TEST_ONLY="one-launch" timeout 120 ./build-gpubin/new/test_decode 2>&1 | grep -E "FAIL|asserts"
  CLATTN_TEST_ONLY="accuracy rule" timeout 120 ./build-gpubin/new/test_decode 2>&1 | grep -E "FAIL|asserts"
fi 2>&1 | tee $OUT/check.txt
for p in tables tune ptune; do # the same parts as session 33's (TUNE_S passes through)
  part $p && OUT=$OUT bash tools/gpu_session33.sh $p
done
true
