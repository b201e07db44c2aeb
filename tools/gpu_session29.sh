# ReRoPE's forward and two-phase backward on warpgroup MMA (cl/wgmma.clh, the PTX route), written in session 29
# without a GPU: first its checks on the H200 (the CLI's full checks against the double
# reference, the warpgroup MMA tests natively, where they take the real instructions), then
# its times against mma.sync in one call, then beside torch SDPA and the seed. The next
# call: session 28's unfinished one (gpu_session28c.sh: the two-phase backward's plan).
# `bash tools/gpu_session29.sh [checks|quick|sweep|torch]...` runs those parts (quick: the
# issue shapes only) (all three in about
# 10 minutes; give a call one or two of them when its limit is shorter).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf 'rerope_wgmma=0\nrerope_bwd_wgmma=0\n' > /tmp/wg.txt
printf 'rerope_wgmma=0\nrerope_bwd_wgmma=0\n' > /tmp/bwg.txt
printf 'rerope_wgmma=0\nrerope_bwd_wgmma=0\nrerope_bwd_block_m=16\n' > /tmp/bwg16.txt
printf 'rerope_wgmma=0\nrerope_bwd_wgmma=0\nrerope_bwd_block_m=16\nrerope_bwd_qring=1\n' > /tmp/bwg16n.txt
printf 'rerope_wgmma=0\nrerope_wgmma_wg=128\n' > /tmp/wg128.txt
printf 'rerope_wgmma=0\nrerope_wgmma_wg=128\nrerope_stages=3\nrerope_wgmma_block_n=16\n' > /tmp/wgs3.txt
printf 'rerope_wgmma=0\nrerope_stages=1\nrerope_wgmma_block_n=64\n' > /tmp/wgs1.txt
printf 'rerope_wgmma=0\nrerope_stages=1\nrerope_wgmma_block_n=128\n' > /tmp/wgbn128.txt
C="./build-gpubin/new/clattn run rerope"
checks() { # $1: extra build options (a descriptor diagnosis), the rest to the log
  for dt in f16 bf16; do
    for a in "--n 777 --head-dim 128 --window 200 --causal" "--kv-heads 2 --n 500 --n-k 600 --head-dim 96 --window 150" \
             "--kv-heads 1 --n 700 --head-dim 64 --window 150 --causal" "--n 600 --head-dim 128 --window 100 --causal --on-the-fly" \
             "--n 600 --head-dim 64 --window 100 --on-the-fly --interleaved" "--n 300 --head-dim 80 --window 400 --causal"; do
      CLATTN_TUNING_FILE=/tmp/wg.txt CLATTN_BUILD_OPTIONS="$1" $C --heads 4 $a --dtype $dt --backward --repeat 2
    done
  done 2>&1 | grep -E 'kernels|check|FAIL|rror'
}
PARTS=${*:-checks sweep torch}
if part checks; then
checks "" > $OUT/checks.txt
echo "checks: $(grep -c 'warpgroup MMA' $OUT/checks.txt) on warpgroup MMA, $(grep -c FAILED $OUT/checks.txt) failed"
grep -E 'FAIL|rror' $OUT/checks.txt | head -5
if grep -q FAILED $OUT/checks.txt; then # V's descriptor offsets the other way round?
  checks "-DWG_V_LBO=128 -DWG_V_SBO=(D/8*128)" > $OUT/checks_vswap.txt
  echo "with V's offsets swapped: $(grep -c FAILED $OUT/checks_vswap.txt) failed"
fi
CLATTN_TEST_ONLY="warpgroup" timeout 240 ./build-gpubin/new/test_rerope > $OUT/test_wgmma.txt 2>&1
echo "test_rerope warpgroup rc=$?"; grep -A4 'Run Summary' $OUT/test_wgmma.txt | tail -2
fi
part quick && REGS=1 REPEAT=5 bash tools/gpu_ab_cl.sh tools/sweeps/rr_wgmma_quick.txt
part sweep && REGS=1 REPEAT=${REPEAT:-10} bash tools/gpu_ab_cl.sh tools/sweeps/rr_wgmma.txt
part torch && CLATTN_TUNING_FILE=/tmp/wg.txt timeout 200 python3 tools/rerope_vs_torch.py --clattn build-gpubin/new/clattn \
  --repeat 5 --seed-bwd-max-d 64 2>&1 | tee $OUT/vs_torch_wg.txt | tail -12
