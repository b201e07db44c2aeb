# Session 32's GPU calls. First: `bash tools/gpu_session31b.sh port torch tune` (fp8 by one
# multiply: 8% faster at B=64 ctx=32768, 18% slower at B=16 ctx=8192, with 4-24 bytes of
# spills at 128 registers). This one: the NaN lanes set after the multiply instead of the
# bit-level decode in a branch. `bash tools/gpu_session32.sh` checks fp8 natively and
# portable (every code, the K/V cache kernels, the CLI's check), then times cl/ against
# cl_head/ (the first form: an untracked copy made on the development machine) and
# cl_twin/ (the bit-level decode only, made here), REGS=1 (tools/sweeps/portable_fp8_32b.txt).
# `bash tools/gpu_session32.sh [fp8|torch|bwd|ml]...` (default: fp8).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-fp8}
if part fp8; then
for e in CLATTN_PORTABLE=1 CLATTN_X=0; do
  env $e CLATTN_TEST_ONLY="every fp8 code" timeout 60 ./build-gpubin/new/test_decode 2>&1 | grep -E "fp8|asserts" | head -6
  env $e CLATTN_TEST_ONLY="fp8" timeout 60 ./build-gpubin/new/test_kvcache 2>&1 | grep -E "FAIL|asserts" | head -4
  for kv in fp8 fp8fnuz; do env $e ./build-gpubin/new/clattn run decode --batch 3 --heads 8 --kv-heads 2 --ctx 1000 --kv-dtype $kv --repeat 2 2>&1 | grep -E "check|rror"; done
done | tee $OUT/checks.txt
rm -rf cl_twin && cp -r cl cl_twin && sed -i 's/^#elif !QUANT_STRAIGHT \&\& CLATTN_F32_DENORM$/#elif 0/' cl_twin/quant.clh
grep -q '^#elif 0$' cl_twin/quant.clh || echo "cl_twin: the fp8 branch was not found"
[ -d cl_head ] || echo "cl_head: missing (copy cl/ with 7a6a9f8's quant.clh)"
OUT=$OUT REPEAT=10 REGS=1 timeout 300 bash tools/gpu_ab_cl.sh tools/sweeps/${SWEEP:-portable_fp8_32b}.txt
fi
# issue #20's table (nothing in decode changed since session 29's; the fresh figures for the note)
part torch && PYTHONUNBUFFERED=1 timeout 240 python3 tools/decode_vs_torch.py --clattn build-gpubin/new/clattn --repeat 20 2>&1 | tee $OUT/decode_vs_torch.txt
# one launch at 16 splits on the B=1 shapes, main's merge (cl/) against branch exp/merge-lse8's (cl_ml/: tools/sweeps/merge_last16.txt says how to make it)
printf 'decode_merge_last=16\n' > /tmp/ml16.txt; printf 'decode_merge_last=64\n' > /tmp/ml64.txt
part ml && { [ -d cl_ml ] || echo "cl_ml: missing (tools/sweeps/merge_last16.txt)"; } && OUT=$OUT/ml REPEAT=20 timeout 200 bash tools/gpu_ab_cl.sh tools/sweeps/merge_last16.txt
# the warpgroup MMA backward at every D on this GPU (tools/sweeps/rr_bwd_wg3.txt)
printf 'rerope_bwd_wgmma=3\n' > /tmp/bwg3.txt; printf 'rerope_wgmma=0\n' > /tmp/fwg.txt
part bwd && OUT=$OUT/bwd REPEAT=10 timeout 300 bash tools/gpu_ab_cl.sh tools/sweeps/${BWD_SWEEP:-rr_bwd_wg3}.txt
