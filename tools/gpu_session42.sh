# Session 42's GPU calls: `bash tools/gpu_session42.sh [table|rr|mq|h200|rtune|dq64|dqx|dqfix|final|wgp]...`
# (default: table rr mq h200);
# the tuner's: `TUNE_S=590 bash tools/gpu_session34.sh tune` (and ptune).
# table: issue #20's table (tools/decode_vs_torch.py, xformers' column where tools/exp/xf imports);
# rr: issue #21's table (tools/rerope_vs_torch.py, as tools/gpu_session37.sh rr);
# mq: Mq = 2 and 4 causal at 5-8 splits, one launch against two (tools/sweeps/session42a.txt,
#   the CLI's checks of one launch first);
# h200: B=1 decode's split counts and blocks in flight, the warpgroup MMA forward against
#   mma.sync (tools/sweeps/session42b.txt; meant for an H200, run on an H100);
# rtune: `clattn tune --family rerope-bwd`, then `--family rerope` (never run on a GPU before);
# dq64: the wrong dq that rtune found (warpgroup MMA, D = 64, dq's key tiles of 64): the CLI's
#   checks under variations (its D = 32 lines took mma.sync then: the plan's exclusion), and
#   NVIDIA's PTX of each program (the disk cache's entries) in $OUT;
# dqx: that dq kernel's variations (tools/exp/cl_dq from tools/sweeps/session42_dq.patch, -DDQX=1..6:
#   S and dP chains in halves, dq's chain in halves, S and dP waited apart, a barrier before dq's
#   chain, dq's chain one instruction at a time, S and dP's accumulators zeroed first);
# dqfix: the fix (dq's chain in halves where its key tiles are D): the CLI's checks at D = 32 and
#   64, test_rerope natively, then tools/sweeps/session42c.txt;
# final: the CLI's checks of the final tree (tools/sweeps/session42_checks.txt: portable int4,
#   int4g4, fp8 after Q_GROUP_SUM; tensor cores) and of the ReRoPE backward at D = 32 and 64;
# wgp: the warpgroup forward pipelined (tools/exp/cl_wgp from
#   tools/sweeps/session42_wgp.patch, -DWGP=1): the CLI's checks, then tools/sweeps/session42d.txt.
# Results: tools/PERF.md session 42.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-table rr mq h200}
C=./build-gpubin/new/clattn
[ -d tools/exp/xf/xformers ] && export PYTHONPATH=$PWD/tools/exp/xf${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
part table && python3 tools/decode_vs_torch.py --clattn $C --repeat 20 2>&1 |
  grep -v "WARN\|Please\|Memory-eff\|MORE_DET" | tee $OUT/table.txt
part rr && PYTHONUNBUFFERED=1 timeout 200 python3 tools/rerope_vs_torch.py --clattn $C --repeat 5 \
  --seed-bwd-max-d 64 --shape 1/32/8192/64/2048/causal --shape 1/32/8192/64/2048 \
  --shape 1/32/8192/128/2048/causal --shape 1/32/8192/128/8192/causal 2>&1 | tee $OUT/rerope_vs_torch.txt
if part mq; then
  printf "decode_merge_last=32\n" > /tmp/ml32.txt; printf "decode_merge_last=0\n" > /tmp/ml0.txt
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/mqcheck.txt
CLATTN_TUNING_FILE=/tmp/ml32.txt --batch 1 --ctx 8192 --q-len 4 --causal --splits 8 --lse
CLATTN_TUNING_FILE=/tmp/ml32.txt --batch 4 --ctx 7000 --q-len 4 --causal --splits 6 --varlen --bias
SHAPES
  OUT=$OUT/ab1 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session42a.txt
fi
if part h200; then
  printf "decode_mma_small_blocks=1\n" > /tmp/nb1.txt; printf "decode_mma_small_blocks=3\n" > /tmp/nb3.txt
  printf "decode_mma_small_wg=0\n" > /tmp/sw0.txt
  printf "rerope_wgmma=0\nrerope_wgmma_maxnreg=128\n" > /tmp/wg0.txt
  for a in "--head-dim 128 --causal" "--head-dim 64" "--head-dim 128 --window 5000 --causal"; do
    echo "== wg0 $a: $(CLATTN_TUNING_FILE=/tmp/wg0.txt timeout 120 $C run rerope --heads 4 --n 700 --window 300 \
      --repeat 1 $a 2>&1 | grep -E 'kernels|FAIL|rror|check' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/wgcheck.txt
  OUT=$OUT/ab2 REPEAT=${REPEAT:-20} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session42b.txt
fi
if part dq64; then
  for v in "bn64:rerope_bwd_block_n=64" "bn32:rerope_bwd_block_n=32" "bn64s1:rerope_bwd_block_n=64 rerope_bwd_stages=1" \
           "bn64nocap:rerope_bwd_block_n=64 rerope_wgmma_maxnreg=0" "bn64mma:rerope_bwd_block_n=64 rerope_bwd_wgmma=1" \
           "d32bn32:rerope_bwd_block_n=32" "d32bn64:rerope_bwd_block_n=64"; do
    name=${v%%:*}; printf "%s\n" ${v#*:} > /tmp/t_$name.txt; d=64; case $name in d32*) d=32 ;; esac
    mkdir -p $OUT/ptx_$name
    echo "== $name D=$d: $(CLATTN_CACHE_DIR=$OUT/ptx_$name CLATTN_TUNING_FILE=/tmp/t_$name.txt timeout 120 $C run rerope \
      --heads 4 --n 700 --window 300 --head-dim $d --causal --backward --repeat 1 2>&1 | grep -E 'kernels|FAIL|rror|check' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/dq64.txt
fi
if part dqx; then
  exp_cl cl_dq f7df54e tools/sweeps/session42_dq.patch
  printf "rerope_bwd_block_n=64\n" > /tmp/t_bn64.txt
  for x in 0 1 2 3 4 5 6; do
    echo "== DQX=$x: $(CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_dq CLATTN_BUILD_OPTIONS=-DDQX=$x CLATTN_TUNING_FILE=/tmp/t_bn64.txt \
      timeout 120 $C run rerope --heads 4 --n 700 --window 300 --head-dim 64 --causal --backward --repeat 1 2>&1 |
      grep -E 'kernels|FAIL|rror|check dq' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/dqx.txt
fi
if part dqfix; then
  printf "rerope_bwd_block_n=64\n" > /tmp/t_bn64.txt; printf "rerope_bwd_wgmma=1\n" > /tmp/bw1.txt
  for a in "--head-dim 32 --causal" "--head-dim 32 --kv-heads 2" "--head-dim 32 --causal --dtype bf16" \
           "--head-dim 32 --on-the-fly --causal" "--head-dim 64 --causal" "--head-dim 64 --window 40"; do
    for f in /dev/null /tmp/t_bn64.txt; do
      echo "== $f $a: $(CLATTN_TUNING_FILE=$f timeout 120 $C run rerope --heads 4 --n 700 --window 300 --backward \
        --repeat 1 $a 2>&1 | grep -E 'kernels|FAIL|rror|check d' | tr '\n' ' ')"
    done
  done 2>&1 | tee $OUT/dqfix.txt
  timeout 300 ./build-gpubin/new/test_rerope > $OUT/test_rerope.txt 2>&1; echo "test_rerope: rc $?"; tail -8 $OUT/test_rerope.txt
  OUT=$OUT/ab3 REPEAT=${REPEAT:-10} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session42c.txt
fi
if part final; then
  C=$C bash tools/gpu_checks.sh < tools/sweeps/session42_checks.txt | tee $OUT/final.txt
  for a in "--head-dim 32 --causal" "--head-dim 64 --kv-heads 2"; do
    echo "== $a: $(timeout 120 $C run rerope --heads 4 --n 700 --window 300 --backward --repeat 1 $a 2>&1 |
      grep -E 'kernels|FAIL|rror|check d' | tr '\n' ' ')"
  done 2>&1 | tee -a $OUT/final.txt
fi
if part wgp; then
  exp_cl cl_wgp e48dd76 tools/sweeps/session42_wgp.patch
  printf "rerope_wgmma=0\nrerope_wgmma_maxnreg=128\n" > /tmp/wg0.txt
  printf "rerope_wgmma=0\nrerope_wgmma_maxnreg=128\nrerope_wgmma_block_n=32\n" > /tmp/wg0b32.txt
  printf "rerope_wgmma=0\nrerope_wgmma_maxnreg=0\n" > /tmp/wg0nc.txt
  for a in "--head-dim 64 --causal" "--head-dim 64 --kv-heads 2" "--head-dim 128 --causal" \
           "--head-dim 128 --window 5000 --causal --dtype bf16" "--head-dim 48 --n-k 900"; do
    echo "== wgp $a: $(CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_wgp CLATTN_BUILD_OPTIONS=-DWGP=1 CLATTN_TUNING_FILE=/tmp/wg0.txt \
      timeout 120 $C run rerope --heads 4 --n 700 --window 300 --repeat 1 $a 2>&1 | grep -E 'kernels|FAIL|rror|check' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/wgpcheck.txt
  OUT=$OUT/ab4 REPEAT=${REPEAT:-10} timeout ${AB_S:-300} bash tools/gpu_ab_cl.sh tools/sweeps/session42d.txt
fi
for f in rerope-bwd rerope; do
  part rtune && /usr/bin/time -f "wall %e s" timeout ${TUNE_S:-280} $C tune --family $f --out $OUT/tune-$f.txt 2>&1 |
    tee $OUT/tune-$f.log | tail -25
done
true
