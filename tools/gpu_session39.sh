# Session 39's GPU calls: `bash tools/gpu_session39.sh [pcap]...` (default: pcap) (other parts: tools/gpu_session38.sh).
# pcap: the portable decode under register caps through the PTX route (tools/sweeps/session39a.txt),
#   the CLI's checks of the capped forms first (f16, int4, fp8, paged, causal Mq=3).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-pcap}
C=./build-gpubin/new/clattn
printf 'decode_wg=128\n' > /tmp/wg128.txt
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
true
