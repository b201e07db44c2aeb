# Session 35's GPU calls: `bash tools/gpu_session35.sh [part]...` (default: wglog), in the
# order they ran:
# wglog: the warpgroup MMA kernels (forward D = 64 / 128, backward D = 64 / 128) built
#   through the PTX route with -cl-nv-verbose: ptxas's remarks (registers, and whether it
#   serialized the wgmma chains) from the debug log, and the edited PTX from the disk cache
#   (under $OUT/cache) for ptxas here;
# capcheck: the CLI's checks under register caps of 128 and 96 (CLATTN_BUILD_OPTIONS);
# ab: tools/sweeps/maxnreg.txt (a register cap through the PTX route), with NVIDIA's
#   register counts (REGS=1);
# wgcheck: the defaults (128 registers up to D = 64) through the CLI's checks and
#   test_rerope's warpgroup tests natively;
# cap: tools/sweeps/rr_cap.txt (that cap against none and 96; tiles under it);
# d32, d32b: the D = 32 warpgroup backward's wrong dq (with and without the cap; which part
#   of the plan it follows);
# native: after D = 32 left warpgroup MMA: its checks and the whole test_rerope natively;
# rr: issue #21's table (ReRoPE beside torch and the seed, tools/rerope_vs_torch.py).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-wglog}
C="./build-gpubin/new/clattn run rerope --z 1 --heads 4 --n 1024 --window 256 --dtype f16 --repeat 1"
printf 'rerope_wgmma=0\nrerope_bwd_wgmma=3\n' > /tmp/wg.txt
printf 'rerope_wgmma=0\n' > /tmp/fwg.txt; printf 'rerope_wgmma=0\nrerope_wgmma_wg=128\n' > /tmp/fwg128.txt
printf 'rerope_bwd_wgmma=3\n' > /tmp/bwg3.txt
printf 'rerope_wgmma_maxnreg=0\n' > /tmp/cap0.txt; printf 'rerope_wgmma_maxnreg=96\n' > /tmp/cap96.txt
printf 'rerope_bwd_block_m=64\n' > /tmp/bm64.txt; printf 'rerope_bwd_block_n=64\n' > /tmp/bn64.txt
printf 'rerope_bwd_block_m=64\nrerope_bwd_block_n=64\n' > /tmp/bmn64.txt; printf 'rerope_bwd_stages=1\n' > /tmp/st1.txt
printf 'rerope_bwd_block_m=64\nrerope_bwd_block_n=64\nrerope_wgmma_maxnreg=0\n' > /tmp/bmn64c0.txt
if part wglog; then
  export CLATTN_CACHE_DIR=$OUT/cache
  for a in "--head-dim 64 --causal" "--head-dim 128 --causal" "--head-dim 64 --causal --backward" \
           "--head-dim 128 --causal --backward"; do
    echo "== $a"
    CLATTN_TUNING_FILE=/tmp/wg.txt CLATTN_LOG=debug CLATTN_BUILD_OPTIONS=-cl-nv-verbose $C $a 2>&1 |
      grep -i -E "kernels|serializ|performance|wgmma|registers|spill|Compiling entry|rror|check" | head -30
  done 2>&1 | tee $OUT/wglog.txt
fi
if part capcheck; then # the CLI's checks with a register cap (spilled kernels still right)
  for a in "rerope --heads 4 --n 700 --head-dim 64 --window 150 --causal --backward" \
           "rerope --heads 4 --n 600 --head-dim 128 --window 100 --causal --backward" \
           "decode --batch 3 --ctx 3000 --head-dim 80 --paged" "decode --batch 3 --ctx 3000 --kv-dtype int4 --paged --page-size 16"; do
    for m in 128 96; do
      echo "== cap $m: $a"
      CLATTN_TUNING_FILE=/tmp/wg.txt CLATTN_BUILD_OPTIONS=-DCLATTN_PTX_MAXNREG=$m ./build-gpubin/new/clattn run $a --repeat 1 2>&1 |
        grep -E "kernels|kernel:|check|FAIL|rror"
    done
  done 2>&1 | tee $OUT/capcheck.txt
fi
for r in ${ROUNDS:-1}; do
  part ab && OUT=$OUT/ab$r REPEAT=${REPEAT:-20} timeout ${AB_S:-400} bash tools/gpu_ab_cl.sh ${SWEEP:-tools/sweeps/maxnreg.txt}
  part cap && OUT=$OUT/cap$r REPEAT=${REPEAT:-10} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/rr_cap.txt
done
if part wgcheck; then # the defaults (128 registers up to D = 64) through the CLI's checks and the tests
  for dt in f16 bf16; do
    for a in "--kv-heads 1 --n 700 --head-dim 64 --window 150 --causal" "--kv-heads 2 --n 500 --n-k 600 --head-dim 48 --window 150" \
             "--n 600 --head-dim 64 --window 100 --causal --on-the-fly" "--n 300 --head-dim 32 --window 400 --causal"; do
      ./build-gpubin/new/clattn run rerope --heads 4 $a --dtype $dt --backward --repeat 2
    done
  done 2>&1 | grep -E 'kernels|check|FAIL|rror' > $OUT/wgcheck.txt
  echo "checks: $(grep -c 'warpgroup MMA' $OUT/wgcheck.txt) on warpgroup MMA, $(grep -c FAILED $OUT/wgcheck.txt) failed"
  CLATTN_TEST_ONLY="warpgroup" timeout 240 ./build-gpubin/new/test_rerope > $OUT/test_wgmma.txt 2>&1
  echo "test_rerope warpgroup rc=$?"; grep -A4 'Run Summary' $OUT/test_wgmma.txt | tail -2
fi
if part d32; then # the D = 32 failure of wgcheck: with and without the cap
  for f in /dev/null /tmp/cap0.txt; do
    for a in "--n 300 --head-dim 32 --window 400 --causal" "--n 300 --head-dim 32 --window 40 --causal" \
             "--n 300 --head-dim 16 --window 400 --causal" "--n 300 --head-dim 48 --window 400 --causal" \
             "--n 300 --head-dim 64 --window 400 --causal" "--n 300 --head-dim 32 --window 400"; do
      echo "== $f $a"
      CLATTN_TUNING_FILE=$f ./build-gpubin/new/clattn run rerope --heads 4 $a --dtype f16 --backward --repeat 1 2>&1 |
        grep -E 'FAIL|rror'
    done
    echo "== $f test"
    CLATTN_TUNING_FILE=$f RR_ONLY="D=32" CLATTN_TEST_ONLY="warpgroup" timeout 100 ./build-gpubin/new/test_rerope 2>&1 | grep -E "got|asserts"
  done 2>&1 | tee $OUT/d32.txt
fi
if part d32b; then # which part of the D = 32 warpgroup backward goes wrong
  printf 'rerope_bwd_block_n=16\n' > /tmp/bn16.txt; printf 'rerope_bwd_wgmma=1\n' > /tmp/nowg.txt
  printf 'rerope_bwd_block_m=16\n' > /tmp/bm16.txt
  for v in "/dev/null|" "/tmp/st1.txt|" "/tmp/bn64.txt|" "/tmp/bn16.txt|" "/tmp/nowg.txt|" "/tmp/bm16.txt|" "/tmp/bm64.txt|" \
           "/dev/null|-DWG_V_LBO=128 -DWG_V_SBO=(D/8*128)"; do
    f=${v%%|*}; bo=${v#*|}
    for a in "--n 300 --head-dim 32 --window 40 --causal" "--n 300 --kv-heads 4 --head-dim 32 --window 40"; do
      echo "== $f [$bo] $a: $(CLATTN_TUNING_FILE=$f CLATTN_BUILD_OPTIONS="$bo" ./build-gpubin/new/clattn run rerope --heads 4 $a \
        --dtype f16 --backward --repeat 1 2>&1 | grep -E 'FAIL|rror' | tr '\n' ' ')"
    done
  done 2>&1 | tee $OUT/d32b.txt
fi
if part native; then # after the D = 32 exclusion: the CLI's D = 32 checks and test_rerope natively
  {
    for a in "--n 300 --head-dim 32 --window 40 --causal" "--n 300 --kv-heads 4 --head-dim 32 --window 400"; do
      echo "== $a: $(./build-gpubin/new/clattn run rerope --heads 4 $a --dtype f16 --backward --repeat 1 2>&1 |
        grep -E 'kernels|FAIL|rror' | tr '\n' ' ')"
    done
    timeout 150 ./build-gpubin/new/test_rerope > $OUT/test_rerope.txt 2>&1
    echo "test_rerope rc=$?"; grep -E "got|FAIL" $OUT/test_rerope.txt | head; grep -A4 'Run Summary' $OUT/test_rerope.txt | tail -3
  } 2>&1 | tee $OUT/native.txt
fi
if part rr; then
  PYTHONUNBUFFERED=1 timeout 200 python3 tools/rerope_vs_torch.py --clattn ./build-gpubin/new/clattn --repeat 5 \
    --seed-bwd-max-d 64 --shape 1/32/8192/64/2048/causal --shape 1/32/8192/64/2048 \
    --shape 1/32/8192/128/2048/causal --shape 1/32/8192/128/8192/causal 2>&1 | tee $OUT/rerope_vs_torch.txt
fi
true
