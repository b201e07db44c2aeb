#!/bin/bash
# On the H200 (device tool): the SASS of every kernel a `clattn run` command
# builds, as NVIDIA's OpenCL compiler made it, and the instruction mix of each
# kernel's tensor-core loop (tools/sass_loop.py).
#   bash tools/gpu_sass.sh decode --batch 64 --ctx 32768 --kv-dtype int4 --no-check
# The driver's program cache holds PTX: it is assembled again with the ptxas
# and cuobjdump that Triton bundles (its PTX ISA 9.x header lowered to 8.7,
# which they accept). Register counts: ptxas -v, as in the .ptxas.txt files.
# Logs under $OUT: sass.tgz (SASS, PTX, ptxas output per kernel), mix.txt.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=./build-gpu
TB=$(python3 -c "import triton, os; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin'))")
export CLATTN_CACHE_DIR=/tmp/sass-cache
rm -rf $CLATTN_CACHE_DIR /tmp/sass; mkdir -p /tmp/sass
$B/clattn run "$@" > /tmp/sass/run.txt 2>&1
for f in $CLATTN_CACHE_DIR/*.bin; do
  n=$(basename $f .bin)
  # the cache entry's header ends where the PTX text starts
  python3 - "$f" /tmp/sass/$n.ptx <<'PY'
import sys
b = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(b[b.find(b'//'):].split(b'\0')[0])
PY
  sed -i 's/^\.version 9\.[0-9]/.version 8.7/' /tmp/sass/$n.ptx
  $TB/ptxas -arch=sm_90 -v /tmp/sass/$n.ptx -o /tmp/sass/$n.cubin > /tmp/sass/$n.ptxas.txt 2>&1
  $TB/cuobjdump -sass /tmp/sass/$n.cubin > /tmp/sass/$n.sass 2>&1
  echo "$n: $(grep -o '\.entry [a-z_]*' /tmp/sass/$n.ptx | head -1), $(grep -o 'Used [0-9]* registers' /tmp/sass/$n.ptxas.txt | head -1)"
  python3 tools/sass_loop.py /tmp/sass/$n.sass
done | tee $OUT/mix.txt
(cd /tmp/sass && tar czf $OUT/sass.tgz *.sass *.ptx *.ptxas.txt run.txt)
