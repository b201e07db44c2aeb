#!/bin/sh
# ReRoPE on the H200: correctness of the tensor-core kernels (their first run
# on real hardware), then the performance targets of issue 6
# (Z=1, H=32, N=8192, D=64, W=2048, f16):
#   causal forward <= 1.445 ms, causal fwd+bwd <= 9.4 ms,
#   non-causal forward <= 2.1 ms, non-causal fwd+bwd <= 26 ms.
# Usage: tools/rerope_h200.sh [build-dir] (default build-gpu); CLATTN_DEVICE
# selects the GPU where PoCL is registered beside it (default: "NVIDIA").
set -e
B=${1:-build-gpu}
export CLATTN_DEVICE=${CLATTN_DEVICE:-NVIDIA}
C="$B/clattn run rerope"

echo "== the test suite on the GPU (tensor cores where f16/bf16, portable kernels otherwise)"
"$B/tests/test_rerope"

echo "== full checks, forward and backward, tensor cores vs the double reference"
for dt in f16 bf16; do
  for causal in "" --causal; do
    $C --heads 4 --kv-heads 2 --n 1000 --n-k 1100 --head-dim 64 --window 300 --dtype $dt $causal --backward --repeat 3
  done
  $C --heads 4 --n 777 --head-dim 128 --window 200 --dtype $dt --causal --backward --repeat 3
  $C --heads 4 --n 777 --head-dim 32 --window 900 --dtype $dt --backward --repeat 3
  $C --heads 4 --n 1024 --head-dim 64 --window 256 --dtype $dt --causal --backward --on-the-fly --repeat 3
  $C --heads 4 --n 1024 --head-dim 64 --window 256 --dtype $dt --backward --on-the-fly --interleaved --repeat 3
done
echo "== the same shapes on the portable kernels (CLATTN_PORTABLE=1)"
CLATTN_PORTABLE=1 $C --heads 4 --kv-heads 2 --n 1000 --n-k 1100 --head-dim 64 --window 300 --causal --backward --repeat 3

echo "== targets (forward checked on sampled rows; --no-check to skip)"
$C --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype f16 --causal --backward --repeat 20
$C --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype f16 --backward --repeat 10
echo "== on the fly, bf16, D=128 (forward tensor cores, backward portable above D=64)"
$C --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype f16 --causal --backward --on-the-fly --repeat 10
$C --z 1 --heads 32 --n 8192 --head-dim 64 --window 2048 --dtype bf16 --causal --backward --repeat 10
$C --z 1 --heads 32 --n 8192 --head-dim 128 --window 2048 --dtype f16 --causal --repeat 10
