# Session 39's GPU calls: `bash tools/gpu_session39.sh [pcap|kpre]...` (default: pcap kpre) (other parts: tools/gpu_session38.sh).
# pcap: the portable decode under register caps through the PTX route (tools/sweeps/session39a.txt),
#   the CLI's checks of the capped forms first (f16, int4, fp8, paged, causal Mq=3);
# kpre: the portable decode's next quantized K row loaded before the value pass (tools/sweeps/session39b.txt;
#   tools/exp/cl_kpre = 2c0335a's cl/ with tools/sweeps/session39b.patch, made here where git and patch are), checks first.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-pcap kpre}
C=./build-gpubin/new/clattn
printf 'decode_wg=128\n' > /tmp/wg128.txt; printf 'decode_kq_wide=0\n' > /tmp/kq0.txt
if part pcap; then
  for o in -DCLATTN_PTX_MAXNREG=80 -DCLATTN_PTX_MAXNREG=64; do
    for a in "--batch 4 --ctx 8192 --lse" "--batch 2 --ctx 5000 --kv-dtype int4 --paged" \
             "--batch 2 --ctx 5000 --kv-dtype fp8 --q-len 3 --causal"; do
      echo "== $o $a: $(CLATTN_PORTABLE=1 CLATTN_BUILD_OPTIONS=$o timeout 60 $C run decode --repeat 1 $a 2>&1 |
        grep -E '^kernel|check|rror' | tr '\n' ' ')"
    done
  done 2>&1 | tee $OUT/pcapcheck.txt
  OUT=$OUT/ab10 REPEAT=${REPEAT:-20} timeout ${AB_S:-240} bash tools/gpu_ab_cl.sh tools/sweeps/session39a.txt
fi
if part kpre; then
  exp_cl cl_kpre 2c0335a tools/sweeps/session39b.patch
  for a in "--batch 2 --ctx 5000 --kv-dtype int4 --lse" "--batch 3 --ctx 3000 --kv-dtype int4 --paged --varlen --q-len 2 --causal" \
           "--batch 2 --ctx 5000 --kv-dtype int4g4 --splits 3" "--batch 2 --ctx 4000 --kv-dtype fp8 --head-dim 80 --bias"; do
    echo "== kpre $a: $(CLATTN_PORTABLE=1 CLATTN_TUNING_FILE=/tmp/kq0.txt CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_kpre \
      CLATTN_BUILD_OPTIONS=-DKPRE=1 timeout 60 $C run decode --repeat 1 $a 2>&1 | grep -E '^kernel|check|rror' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/kprecheck.txt
  OUT=$OUT/ab11 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session39b.txt
fi
true
