#!/bin/bash
# On the H200 (device tool): the portable decode (CLATTN_PORTABLE=1) with
# more value rows in flight per work-item (-DVU through CLATTN_BUILD_OPTIONS;
# the kernel's default is 4) and other work-group sizes, per K/V format (one round:
# repeated runs agreed within 0.1% in sweep7); then the register counts of the f16 / int4 / fp8
# kernels (Triton's ptxas, as tools/gpu_sass.sh). Logs: $OUT/vu.txt, regs.txt.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpubin/new
export CLATTN_PORTABLE=1
t() { # tuning overrides or -, build options or -, then flags
  local tf=$1 bo=$2; shift 2
  if [ "$tf" = - ]; then : > /tmp/t.txt; else printf '%s' "$tf" | tr ',' '\n' > /tmp/t.txt; fi
  [ "$bo" = - ] && bo=
  CLATTN_TUNING_FILE=/tmp/t.txt CLATTN_BUILD_OPTIONS="$bo" $B/clattn run decode "$@" --repeat 20 --no-check 2>&1 |
    sed -n -e 's/^time: \([0-9.]*\) ms.*/\1/p' | tr '\n' ' '; }
S64="--batch 64 --ctx 32768 --heads 32 --kv-heads 8"
for r in 1; do
  for kv in f16 int4 fp8; do
    for bo in - -DVU=8 -DVU=16; do echo "r$r $kv B64 32k VU=$bo: $(t - $bo $S64 --kv-dtype $kv)"; done
    echo "r$r $kv B64 32k wg128: $(t decode_wg=128 - $S64 --kv-dtype $kv)"
    echo "r$r $kv B64 32k wg128 VU=16: $(t decode_wg=128 -DVU=16 $S64 --kv-dtype $kv)"
  done
  for bo in - -DVU=8; do
    echo "r$r f16 B64 4k VU=$bo: $(t - $bo --batch 64 --ctx 4096 --heads 32 --kv-heads 8)"
    echo "r$r f16 B1 32k VU=$bo: $(t - $bo --batch 1 --ctx 32768 --heads 32 --kv-heads 8)"
    echo "r$r int4 B1 32k VU=$bo: $(t - $bo --batch 1 --ctx 32768 --heads 32 --kv-heads 8 --kv-dtype int4)"
  done
  echo "r$r int4 B1 32k VU=16: $(t - -DVU=16 --batch 1 --ctx 32768 --heads 32 --kv-heads 8 --kv-dtype int4)"
done | tee $OUT/vu.txt
TB=$(python3 -c "import triton, os; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin'))")
for kv in f16 int4 fp8; do for bo in "" -DVU=16; do
  export CLATTN_CACHE_DIR=/tmp/rc-$kv$bo; rm -rf $CLATTN_CACHE_DIR
  CLATTN_BUILD_OPTIONS="$bo" $B/clattn run decode $S64 --kv-dtype $kv --repeat 1 --no-check > /dev/null 2>&1
  for f in $CLATTN_CACHE_DIR/*.bin; do
    python3 - "$f" /tmp/k.ptx <<'PY'
import sys
b = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(b[b.find(b'//'):].split(b'\0')[0])
PY
    sed -i 's/^\.version 9\.[0-9]/.version 8.7/' /tmp/k.ptx
    echo "$kv $bo $(grep -o '\.entry [a-z_]*' /tmp/k.ptx | head -1): $($TB/ptxas -arch=sm_90 -v /tmp/k.ptx -o /tmp/k.cubin 2>&1 | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores' | tr '\n' ' ')"
  done
done; done | tee $OUT/regs.txt
