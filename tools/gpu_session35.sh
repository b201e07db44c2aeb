# Session 35's GPU calls. `bash tools/gpu_session35.sh [wglog]...`
# wglog: the warpgroup MMA kernels (forward D = 64 / 128, backward D = 64 / 128) built
# through the PTX route with -cl-nv-verbose: ptxas's remarks (registers, and whether it
# serialized the wgmma chains) from the debug log, and the edited PTX from the disk cache
# (under $OUT/cache) for ptxas here.
# ab: tools/sweeps/maxnreg.txt (a register cap through the PTX route), with NVIDIA's
# register counts (REGS=1).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-wglog}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
C="./build-gpubin/new/clattn run rerope --z 1 --heads 4 --n 1024 --window 256 --dtype f16 --repeat 1"
printf 'rerope_wgmma=0\nrerope_bwd_wgmma=3\n' > /tmp/wg.txt
printf 'rerope_wgmma=0\n' > /tmp/fwg.txt; printf 'rerope_wgmma=0\nrerope_wgmma_wg=128\n' > /tmp/fwg128.txt
printf 'rerope_bwd_wgmma=3\n' > /tmp/bwg3.txt
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
done
true
