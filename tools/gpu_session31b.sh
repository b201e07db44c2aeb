# Session 31's second call (after tools/gpu_session31.sh, which decided: the warpgroup MMA
# backward on up to D = 64; quantized K rows on 16 bytes in 16-byte loads): the portable
# formats with those defaults (tools/sweeps/portable_q31.txt), issue #21's table beside
# torch with the defaults, and `clattn tune --family decode` on the portable kernels (its
# new int4 shape and knobs). fp8 decoded by one multiply where f32 denormals are kept
# (cl/quant.clh) against its bit-level twin (cl_twin/, a copy this script makes), checked first.
# `bash tools/gpu_session31b.sh [port|torch|tune]...` (default: port tune).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf 'decode_kq_wide=0\n' > /tmp/kq0.txt
PARTS=${*:-port tune}
if part port; then
  for e in CLATTN_PORTABLE=1 CLATTN_X=0; do
    env $e CLATTN_TEST_ONLY="every fp8 code" timeout 60 ./build-gpubin/new/test_decode 2>&1 | grep -E "fp8|asserts" | head -6
    env $e CLATTN_TEST_ONLY="fp8" timeout 60 ./build-gpubin/new/test_kvcache 2>&1 | grep -E "FAIL|asserts" | head -4
    env $e ./build-gpubin/new/clattn devices --device NVIDIA 2>&1 | grep features
    for kv in fp8 fp8fnuz; do env $e ./build-gpubin/new/clattn run decode --batch 3 --heads 8 --kv-heads 2 --ctx 1000 --kv-dtype $kv --repeat 2 2>&1 | grep -E "check|rror"; done
  done | tee $OUT/port_checks.txt
  # cl_twin: the kernels with fp8's bit-level decode only (the twin of the decode by one multiply)
  rm -rf cl_twin && cp -r cl cl_twin && sed -i 's/^#elif !QUANT_STRAIGHT \&\& CLATTN_F32_DENORM$/#elif 0/' cl_twin/quant.clh
  grep -q '^#elif 0$' cl_twin/quant.clh || echo "cl_twin: the fp8 branch was not found"
  OUT=$OUT/port REPEAT=10 timeout 170 bash tools/gpu_ab_cl.sh tools/sweeps/${SWEEP:-portable_q31}.txt
fi
part torch && PYTHONUNBUFFERED=1 timeout 130 python3 tools/rerope_vs_torch.py \
  --clattn build-gpubin/new/clattn --repeat 5 --seed-bwd-max-d 64 --shape 1/32/8192/64/2048/causal \
  --shape 1/32/8192/128/2048/causal --shape 1/32/8192/128/8192/causal --shape 1/32/8192/64/2048 2>&1 | tee $OUT/vs_torch.txt
part tune && CLATTN_PORTABLE=1 timeout ${TUNE_S:-200} ./build-gpubin/new/clattn tune --family decode --out $OUT/tune-portable.txt 2>&1 | tee $OUT/tune-portable.log | tail -30
