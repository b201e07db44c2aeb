# Session 41's GPU calls: `bash tools/gpu_session41.sh [ts|pf|ppf|torch|table|peel|cg|ts2]...` (default: ts pf torch);
# the tuner's: `TUNE_S=590 bash tools/gpu_session34.sh tune` (and ptune).
# ts: where B=1 decode's time goes: the tensor-core kernel with %globaltimer stamps per work-group
#   (tools/exp/cl_ts: entry, first iteration, loop, partials stored, the one-launch merge; printf),
#   summarised by tools/ts_summary.py;
# pf: the L2 prefetch of the next iteration's float blocks (tools/exp/cl_pf, PF_NEXT iterations
#   ahead): the CLI's checks, then tools/sweeps/session41a.txt (registers: tools/check_nvptx.py);
# ppf: the portable decode with OpenCL's prefetch() (tools/exp/cl_ppf, PORT_PF): whether NVIDIA's
#   compiler emits it (its PTX in the program cache), the CLI's checks, tools/sweeps/session41b.txt;
# torch: issue #20's small-batch rows beside cuDNN, HEAD's kernels and the prefetch's;
# table: issue #20's whole table, with xformers' column where tools/exp/xf imports;
# peel: the first iteration's blocks loaded before q (tools/exp/cl_peel); cg: the one-launch
#   merge's partials by ld.global.cg, in one round (tools/exp/cl_cg). Results: tools/PERF.md session 41.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
PARTS=${*:-ts pf torch}
C=./build-gpubin/new/clattn
# the experiments' kernel folders: bbfdf54's cl/ with tools/sweeps/session41_NAME.patch
# (made here where git and patch are at hand; tools/exp travels with the tree)
for x in pf ppf peel ts cg ts2; do exp_cl cl_$x bbfdf54 tools/sweeps/session41_$x.patch; done
if part ts; then
  for ctx in 4096 16384 32768; do
    CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_ts timeout 60 $C run decode --batch 1 --heads 32 --kv-heads 8 \
      --ctx $ctx --repeat 3 --no-check > $OUT/ts$ctx.txt 2>&1
    echo "== ctx $ctx: $(grep -E '^kernel:|^time:' $OUT/ts$ctx.txt | tr '\n' ' ')"
    python3 tools/ts_summary.py $OUT/ts$ctx.txt
  done 2>&1 | tee $OUT/ts.txt
fi
if part pf; then
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/pfcheck.txt
CLATTN_KERNEL_DIR=tools/exp/cl_pf,CLATTN_BUILD_OPTIONS=-DPF_NEXT=1 --batch 1 --ctx 16384 --lse
CLATTN_KERNEL_DIR=tools/exp/cl_pf,CLATTN_BUILD_OPTIONS=-DPF_NEXT=2 --batch 1 --ctx 16000 --lse
CLATTN_KERNEL_DIR=tools/exp/cl_pf,CLATTN_BUILD_OPTIONS=-DPF_NEXT=1 --batch 3 --ctx 5000 --varlen --bias
CLATTN_KERNEL_DIR=tools/exp/cl_pf,CLATTN_BUILD_OPTIONS=-DPF_NEXT=1 --batch 2 --ctx 7000 --head-dim 80 --q-len 3 --causal
SHAPES
  printf "decode_mma_small_wg=0\n" > /tmp/sw0.txt; printf "decode_mma_small_blocks=1\n" > /tmp/nb1.txt; printf "decode_mma_small_blocks=3\n" > /tmp/nb3.txt
  OUT=$OUT/ab1 REPEAT=${REPEAT:-20} timeout ${AB_S:-240} bash tools/gpu_ab_cl.sh tools/sweeps/session41a.txt
fi
if part ppf; then {
  CLATTN_CACHE_DIR=/tmp/ppf-cache CLATTN_PORTABLE=1 CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_ppf CLATTN_BUILD_OPTIONS=-DPORT_PF=2 \
    $C run decode --batch 2 --heads 32 --kv-heads 8 --ctx 4096 --repeat 1 --no-check > /dev/null 2>&1
  echo "prefetch in the PTX: $(grep -a -o 'prefetch[.a-zA-Z0-9]*' -r /tmp/ppf-cache | sort | uniq -c | tr '\n' ' ')"
  C=$C bash tools/gpu_checks.sh <<'SHAPES'
CLATTN_PORTABLE=1,CLATTN_KERNEL_DIR=tools/exp/cl_ppf,CLATTN_BUILD_OPTIONS=-DPORT_PF=2 --batch 3 --ctx 5000 --lse
CLATTN_PORTABLE=1,CLATTN_KERNEL_DIR=tools/exp/cl_ppf,CLATTN_BUILD_OPTIONS=-DPORT_PF=2 --batch 2 --ctx 5000 --kv-dtype int4 --paged
CLATTN_PORTABLE=1,CLATTN_KERNEL_DIR=tools/exp/cl_ppf,CLATTN_BUILD_OPTIONS=-DPORT_PF=1 --batch 2 --ctx 5000 --kv-dtype fp8 --q-len 3 --causal
SHAPES
  OUT=$OUT/ab2 REPEAT=${REPEAT:-20} timeout ${AB_S:-240} bash tools/gpu_ab_cl.sh tools/sweeps/session41b.txt
} 2>&1 | tee $OUT/ppf.txt; fi
# xformers' Python (tools/exp/xf: facebookresearch/xformers 4c82fc33's xformers/, no C++ part)
# gives decode_vs_torch.py its Triton split-K column
[ -d tools/exp/xf/xformers ] && export PYTHONPATH=$PWD/tools/exp/xf${PYTHONPATH:+:$PYTHONPATH}
if part torch; then
  S="--shape 1/32/8/4096 --shape 1/32/8/16384 --shape 1/32/8/32768"
  python3 tools/decode_vs_torch.py --clattn $C --repeat 20 $S 2>&1 | tee $OUT/torch_head.txt
  CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_pf CLATTN_BUILD_OPTIONS=-DPF_NEXT=1 \
    python3 tools/decode_vs_torch.py --clattn $C --repeat 20 $S 2>&1 | tee $OUT/torch_pf1.txt
fi
if part table; then # issue #20's whole table (with xformers where it imports)
  python3 -c "from xformers.ops import fmha; print(fmha.triton_splitk.FwOp)" 2>&1 | tail -3
  python3 tools/decode_vs_torch.py --clattn $C --repeat 20 2>&1 | tee $OUT/table.txt
fi
if part peel; then # the small-batch decode's first blocks loaded before q (tools/exp/cl_peel)
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/peelcheck.txt
CLATTN_KERNEL_DIR=tools/exp/cl_peel --batch 1 --ctx 16384 --lse
CLATTN_KERNEL_DIR=tools/exp/cl_peel --batch 1 --ctx 5000 --paged --q-len 2 --causal --bias
SHAPES
  OUT=$OUT/ab4 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session41d.txt
  S="--shape 1/32/8/16384 --shape 1/32/8/32768"
  CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_peel python3 tools/decode_vs_torch.py --clattn $C --repeat 20 $S 2>&1 |
    grep -v "WARN\|Please\|Memory-eff\|MORE_DET" | tee $OUT/torch_peel.txt
fi
if part cg; then # the one-launch merge's loads by ld.global.cg, in one round (tools/exp/cl_cg)
  C=$C bash tools/gpu_checks.sh <<'SHAPES' | tee $OUT/cgcheck.txt
CLATTN_KERNEL_DIR=tools/exp/cl_cg,CLATTN_BUILD_OPTIONS=-DML_CG=1 --batch 1 --ctx 16384 --lse
CLATTN_KERNEL_DIR=tools/exp/cl_cg,CLATTN_BUILD_OPTIONS=-DML_CG=1 --batch 3 --ctx 9000 --varlen --bias --lse
SHAPES
  OUT=$OUT/ab5 REPEAT=${REPEAT:-20} timeout ${AB_S:-200} bash tools/gpu_ab_cl.sh tools/sweeps/session41e.txt
fi
if part ts2; then # the one-launch merge's time split: ticket, lse round(s), o rounds, stores (tools/exp/cl_ts2)
  for ctx in 4096 16384; do
    CLATTN_KERNEL_DIR=$PWD/tools/exp/cl_ts2 timeout 60 $C run decode --batch 1 --heads 32 --kv-heads 8 \
      --ctx $ctx --repeat 5 --no-check > $OUT/ts2_$ctx.txt 2>&1
    echo "== ctx $ctx: $(grep -E '^time:' $OUT/ts2_$ctx.txt)"
    python3 tools/ts_summary.py $OUT/ts2_$ctx.txt | tail -10
    python3 -c "import sys, statistics as st
r = [[int(x) for x in l.split()[1:]] for l in open(sys.argv[1]) if l.startswith('TM')]
c = [[(x[i + 1] - x[i]) / 1e3 for x in r] for i in range(4)]
print('merging groups (%d): ticket %.2f, lse %.2f, o %.2f, stores %.2f us (medians)' % ((len(r),) + tuple(st.median(v) for v in c)))" $OUT/ts2_$ctx.txt
  done 2>&1 | tee $OUT/ts2.txt
fi
true
