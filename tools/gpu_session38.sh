# Session 38's GPU calls: `bash tools/gpu_session38.sh [ml|ml2|fexp]...` (default: ml ml2) (other parts: tools/gpu_session37.sh).
# ml: the NVIDIA rows' one-launch merge of up to 16 splits by atom_max tickets as default: the
#   tests' one-launch and decode cases natively, the CLI's checks, tools/sweeps/session38b.txt,
#   then issue #20's table (tools/decode_vs_torch.py);
# ml2 (prepared, not run): the one-launch merge's loads in one round (tools/sweeps/session38c.txt,
#   tools/exp/cl_ml2 = f1518d8's cl/ with tools/sweeps/session38c.patch), the CLI's checks first;
# fexp: what the ReRoPE forward's exp2 costs and 2^x on the FMA pipe for part of P (the CLI's
#   checks of each form natively, then tools/sweeps/session38a.txt; tools/exp/cl_fx is e60d272's
#   cl/ with tools/sweeps/session38a.patch, made here where git and patch are at hand).
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-ml ml2}
C=./build-gpubin/new/clattn
printf 'decode_merge_last=8\ndecode_merge_last_max=0\n' > /tmp/old8.txt
printf 'decode_merge_last=64\ndecode_merge_last_max=1\n' > /tmp/ml64.txt; printf 'decode_merge_last=0\n' > /tmp/ml0.txt
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader | tee $OUT/gpu.txt
if part ml; then
  for t in "one-launch" "split"; do
    CLATTN_TEST_ONLY="$t" timeout 100 ./build-gpubin/new/test_decode 2>&1 | grep -E "FAIL|asserts|got" | head -5
  done
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_X=0 --batch 1 --ctx 16384 --lse
CLATTN_X=0 --batch 1 --ctx 4096 --q-len 3 --causal --lse
CLATTN_X=0 --batch 2 --ctx 16384 --dtype bf16 --paged
CLATTN_X=0 --batch 1 --ctx 16384 --head-dim 80 --varlen
CLATTN_X=0 --batch 1 --ctx 16384 --kv-dtype int4 --paged --page-size 16
CLATTN_PORTABLE=1 --batch 4 --ctx 8192 --lse
SHAPES
  OUT=$OUT/ab8 REPEAT=${REPEAT:-20} timeout ${AB_S:-150} bash tools/gpu_ab_cl.sh tools/sweeps/session38b.txt
  PYTHONUNBUFFERED=1 timeout ${TORCH_S:-200} python3 tools/decode_vs_torch.py --clattn $C --repeat 20 2>&1 |
    tee $OUT/decode_vs_torch.txt
fi 2>&1 | tee $OUT/ml.txt
if part ml2; then
  exp_cl cl_ml2 f1518d8 tools/sweeps/session38c.patch
  for a in "--batch 1 --ctx 16384 --lse" "--batch 2 --ctx 16384 --q-len 2 --causal --dtype bf16" \
           "--batch 3 --ctx 5000 --varlen --paged --lse" "--batch 1 --ctx 8192 --head-dim 80 --splits 11"; do
    echo "== one16 $a: $(CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_ml2 CLATTN_BUILD_OPTIONS="-DEXP_ONE=1 -DML_O=16" \
      timeout 60 $C run decode --repeat 1 $a 2>&1 | grep -E '^kernel|check|rror' | tr '\n' ' ')"
  done 2>&1 | tee $OUT/ml2check.txt
  OUT=$OUT/ab9 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session38c.txt
fi
if part fexp; then
  exp_cl cl_fx e60d272 tools/sweeps/session38a.patch
  for o in -DEXP_POLY=1 -DEXP_POLY=2 -DEXP_POLY=3 -DEXP_BPOLY=1; do
    for a in "--head-dim 64 --causal" "--head-dim 64" "--head-dim 128 --causal --kv-heads 2" "--head-dim 64 --dtype bf16" "--head-dim 64 --causal --backward"; do
      echo "== $o $a: $(CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_fx CLATTN_BUILD_OPTIONS=$o timeout 60 \
        $C run rerope --heads 4 --n 700 --window 300 --repeat 1 $a 2>&1 | grep -E 'kernels|FAIL|rror|check' | tr '\n' ' ')"
    done
  done 2>&1 | tee $OUT/fexpcheck.txt
  OUT=$OUT/ab7 REPEAT=${REPEAT:-10} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session38a.txt
fi
true
