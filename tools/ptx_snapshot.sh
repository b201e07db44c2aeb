#!/usr/bin/env bash
# PTX of the tuned kernels' variants (clang-16 for sm_90, tools/check_nvptx.py)
# into a folder, one file per variant, and ptxas's register and spill counts
# beside them: `tools/ptx_snapshot.sh before`, change the kernels,
# `tools/ptx_snapshot.sh after`, then `diff -r before after` shows whether a
# change meant to preserve behaviour kept the code (identical PTX) or what
# moved. The variants are the H200's choices for the benchmark shapes (their
# options as lib/decode.c and lib/rerope.c build them) and the portable twins.
set -euo pipefail
out=${1:?usage: tools/ptx_snapshot.sh <folder>}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
NV="-DCLATTN_NV_SM=90"
# decode: Q_DT KV_DT O_DT D WG RB KV_Q KV_GROUPS FP8_FNUZ ALIGNED PAGED VARLEN CAUSAL HAS_BIAS
# SPLIT LANE_KEYS KSTAGE MMA NBLK STAGES TOKENS TWHOLE STREAM ROWS32 [KV_PAGE_SIZE [more options]]
dec() {
  local name=$1 q=$2 kv=$3 o=$4 d=$5 wg=$6 rb=$7 kvq=$8 g=$9; shift 9
  local al=$1 pg=$2 vl=$3 ca=$4 bi=$5 sp=$6 lk=$7 ks=$8 mma=$9; shift 9
  local nb=$1 st=$2 tok=$3 wh=$4 stm=$5 r32=$6 ps=${7:-} extra=${8:-}
  local opts="-DQ_DT=$q -DKV_DT=$kv -DO_DT=$o -DD=$d -DWG=$wg -DRB=$rb -DKV_Q=$kvq -DKV_GROUPS=$g"
  opts+=" -DFP8_FNUZ=0 -DALIGNED=$al -DPAGED=$pg -DVARLEN=$vl -DCAUSAL=$ca -DHAS_BIAS=$bi -DSPLIT=$sp"
  opts+=" -DLANE_KEYS=$lk -DKSTAGE=$ks -DMMA=$mma -DNBLK=$nb -DSTAGES=$st -DTOKENS=$tok -DTWHOLE=$wh"
  opts+=" -DSTREAM=$stm -DROWS32=$r32${ps:+ -DKV_PAGE_SIZE=$ps}${extra:+ $extra} $NV"
  python3 tools/check_nvptx.py cl/decode.cl "$opts" --ptx "$out/$name.ptx" 2>&1 |
    grep -E "registers|spill" > "$out/$name.ptxas" || true
}
#   name                 q   kv  o   D   WG  RB kq g al pg vl ca bi sp lk ks mma nb st tok wh stm r32 ps
dec mma_f16_split        f16 f16 f16 128 128 8  0  1 1  0  0  0  0  1  0  0  1   1  0  0   0  0   1
dec mma_f16_direct       f16 f16 f16 128 128 8  0  1 1  0  0  0  0  0  0  0  1   1  0  0   0  0   1
dec mma_bf16_d64_paged   bf16 bf16 bf16 64 128 8 0 1 1  1  0  1  0  1  0  0  1   1  0  0   0  0   1  16
dec mma_f16_d256_bias_vl f16 f16 f32 256 128 16 0 1 1  0  1  1  1  1  0  0  1   1  0  0   0  0   1
dec mma_int4_direct      f16 f32 f16 128 128 8  1  1 0  0  0  0  0  1  0  0  1   1  0  0   0  0   1
dec mma_int4_ring        f16 f32 f16 128 256 8  1  1 0  0  0  0  0  1  0  0  1   1  2  0   0  0   1
dec mma_int4_tokens4     f16 f32 f16 128 128 8  1  1 0  0  0  0  0  1  0  0  1   1  0  4   0  0   1
dec mma_int4_whole_strm  f16 f32 f16 128 256 8  1  1 0  0  0  0  0  1  0  0  1   1  0  8   1  1   1
dec mma_int4_whole_paged f16 f32 f16 128 256 8  1  1 0  1  0  1  0  1  0  0  1   1  0  8   1  0   1  16
dec mma_int4g4           f16 f32 f16 128 128 8  1  4 0  0  0  0  0  1  0  0  1   1  0  0   0  0   1
dec mma_int4g2_tokens    f16 f32 f16 128 128 8  1  2 0  0  0  0  0  1  0  0  1   1  0  4   0  0   1
dec mma_fp8              f16 f32 f16 128 256 8  2  1 0  0  0  0  0  1  0  0  1   1  0  0   0  0   1
dec mma_f16_d80          f16 f16 f16 80  128 8  0  1 1  0  0  0  0  1  0  0  1   1  0  0   0  0   1
dec mma_bf16_d96_causal  bf16 bf16 bf16 96 128 16 0 1 1  0  0  1  0  1  0  0  1   1  0  0   0  0   1
dec mma_int4_d80         f16 f32 f16 80  128 8  1  1 0  0  0  0  0  1  0  0  1   1  0  0   0  0   1
dec mma_fp8_ring_causal  f16 f32 f16 128 256 8  2  1 0  1  0  1  0  1  0  0  1   1  2  0   0  0   1  16
dec port_f16_split       f16 f16 f16 128 128 4  0  1 1  0  0  0  0  1  0  0  0   1  0  0   0  0   0
dec port_f32_lanes       f32 f32 f32 64  128 4  0  1 1  0  0  0  0  0  1  0  0   1  0  0   0  0   0
dec port_bf16_kstage     bf16 bf16 bf16 128 128 8 0 1 1 1  1  1  1  1  0  1  0   1  0  0   0  0   0  16
dec port_int4_kstage     f16 f32 f16 128 128 4  1  2 0  0  0  0  0  1  0  1  0   1  0  0   0  0   0
dec port_fp8_lanes       f16 f32 f16 128 128 4  2  1 0  0  0  0  0  1  1  0  0   1  0  0   0  0   0
dec port_f16_d80         f16 f16 f16 80  128 4  0  1 1  0  0  0  0  1  0  0  0   1  0  0   0  0   0
dec port_int4_kq_shift   f16 f32 f16 128 128 4  1  1 0  0  0  0  0  1  0  0  0   1  0  0   0  0   0  "" -DKQ_WIDE=2
dec port_int4g4_kq16     f16 f32 f16 128 128 4  1  4 0  0  0  0  0  1  0  0  0   1  0  0   0  0   0  "" -DKQ_WIDE=1
dec port_fp8_kq16        f16 f32 f16 128 128 4  2  1 0  0  0  0  0  1  0  0  0   1  0  0   0  0   0  "" -DKQ_WIDE=1
dec port_f16_roles       f16 f16 f16 128 256 4  0  1 1  0  0  0  0  1  0  0  0   1  0  0   0  0   0  "" -DROLES=1
dec port_int4g2_roles    f16 f32 f16 128 256 4  1  2 0  1  0  1  0  1  0  0  0   1  0  0   0  0   0  16 -DROLES=1
dec port_f16_kpre        f16 f16 f16 128 256 4  0  1 1  0  0  0  0  1  0  0  0   1  0  0   0  0   0  "" -DKPRE=1
dec port_int4_kpre_paged f16 f32 f16 128 256 4  1  1 0  1  0  1  0  1  0  0  0   1  0  0   0  0   0  16 "-DKPRE=1 -DKQ_WIDE=2"
# ReRoPE: forward and backward, tensor cores and portable
rr() {
  python3 tools/check_nvptx.py "cl/$2" "$3 $NV" --ptx "$out/$1.ptx" 2>&1 | grep -E "registers|spill" > "$out/$1.ptxas" || true
}
rr rr_mma_fwd   rerope.cl     "-DDT=f16 -DD=64 -DRR_MMA=1 -DBM=128 -DBN=64 -DWG=128 -DCT=8 -DSTAGES=2 -DMT=2 -DROTARY=0"
rr rr_mma_fwd_c rerope.cl     "-DDT=f16 -DD=128 -DRR_MMA=1 -DBM=128 -DBN=64 -DWG=128 -DCT=8 -DSTAGES=2 -DMT=2 -DROTARY=1"
rr rr_mma_fwd_pos rerope.cl   "-DDT=bf16 -DD=64 -DRR_MMA=1 -DBM=64 -DBN=64 -DWG=128 -DCT=8 -DSTAGES=1 -DMT=1 -DROTARY=1 -DQPOS=1 -DKPOS=1"
rr rr_mma_fwd_s3 rerope.cl    "-DDT=f16 -DD=64 -DRR_MMA=1 -DBM=64 -DBN=32 -DWG=128 -DCT=8 -DSTAGES=3 -DMT=1 -DROTARY=0 -DKPOS=1"
B="-DRR_MMA=1 -DBM=32 -DBN=32 -DWG=128 -DCT=8"
rr rr_mma_bwd     rerope_bwd.cl "-DDT=f16 -DD=64 $B -DROTARY=0"
rr rr_mma_bwd16   rerope_bwd.cl "-DDT=f16 -DD=16 $B -DROTARY=0"
rr rr_mma_bwd_rot rerope_bwd.cl "-DDT=f16 -DD=64 $B -DROTARY=1"
rr rr_mma_bwd_pos rerope_bwd.cl "-DDT=bf16 -DD=48 $B -DROTARY=0 -DQPOS=1 -DKPOS=1"
rr rr_mma_bwd128  rerope_bwd.cl "-DDT=f16 -DD=128 $B -DROTARY=0 -DNSL=1 -DFRAG_G=1"
rr rr_mma_bwd128s rerope_bwd.cl "-DDT=f16 -DD=128 $B -DROTARY=0 -DNSL=2 -DFRAG_G=1"
rr rr_mma_bwd80   rerope_bwd.cl "-DDT=bf16 -DD=80 $B -DROTARY=0 -DNSL=2 -DFRAG_G=1"
rr rr_mma_bwd256  rerope_bwd.cl "-DDT=f16 -DD=256 $B -DROTARY=0 -DNSL=1 -DFRAG_G=1"
# the two-phase backward (the H200's plans): D=128 (dq one stage of 64 keys, dk/dv's ring of
# query tiles of 32), on the fly (query tiles of 16), D=64 (dq's ring of 2 tiles of 32, query tiles of 32)
PH="-DRR_MMA=1 -DWG=128 -DCT=8 -DPHASED=1"
rr rr_ph_bwd128     rerope_bwd.cl "-DDT=f16 -DD=128 $PH -DBM=32 -DBN=64 -DSTAGES=1 -DQRING=1 -DROTARY=0"
rr rr_ph_bwd128_rot rerope_bwd.cl "-DDT=f16 -DD=128 $PH -DBM=16 -DBN=64 -DSTAGES=1 -DROTARY=1"
rr rr_ph_bwd64      rerope_bwd.cl "-DDT=f16 -DD=64 $PH -DBM=32 -DBN=32 -DSTAGES=2 -DROTARY=0"
# warpgroup MMA (the PTX route's sm_90a): the forward at D=128 / 64, the two-phase backward
WG="-DCLATTN_NV_WGMMA=1 -DRR_WG=1"
rr rr_wg_fwd128 rerope.cl "-DDT=f16 -DD=128 -DRR_MMA=1 -DBM=128 -DBN=32 -DWG=256 -DCT=8 -DSTAGES=2 -DMT=1 -DROTARY=0 $WG"
rr rr_wg_fwd64  rerope.cl "-DDT=f16 -DD=64 -DRR_MMA=1 -DBM=128 -DBN=64 -DWG=256 -DCT=8 -DSTAGES=2 -DMT=1 -DROTARY=0 $WG"
rr rr_wg_bwd128 rerope_bwd.cl "-DDT=f16 -DD=128 $PH -DBM=32 -DBN=64 -DSTAGES=1 -DQRING=1 -DROTARY=0 $WG"
rr rr_wg_bwd64  rerope_bwd.cl "-DDT=f16 -DD=64 $PH -DBM=32 -DBN=32 -DSTAGES=2 -DROTARY=0 $WG"
# portable (RR_MMA=0), then D 64 / 128 x ROTARY 0 / 1 for both directions
rr rr_port_fwd  rerope.cl     "-DDT=f32 -DD=64 -DRR_MMA=0 -DBM=32 -DBN=32 -DWG=128 -DCT=8 -DROTARY=0"
rr rr_port_bwd  rerope_bwd.cl "-DDT=f16 -DD=64 -DRR_MMA=0 -DBM=32 -DBN=32 -DWG=128 -DCT=8 -DROTARY=0"
P="-DRR_MMA=0 -DBM=32 -DBN=32 -DWG=128 -DCT=8"
for d in 64 128; do
  for rot in 0 1; do
    rr rr_port_fwd_d${d}_r${rot} rerope.cl     "-DDT=f16 -DD=$d $P -DROTARY=$rot"
    rr rr_port_bwd_d${d}_r${rot} rerope_bwd.cl "-DDT=f16 -DD=$d $P -DROTARY=$rot"
  done
done
# portable with positions, bf16 / f32, CT 4, and the mask ends
rr rr_port_fwd_pos  rerope.cl     "-DDT=bf16 -DD=64 $P -DROTARY=1 -DQPOS=1 -DKPOS=1"
rr rr_port_bwd_pos  rerope_bwd.cl "-DDT=bf16 -DD=64 $P -DROTARY=1 -DQPOS=1 -DKPOS=1"
rr rr_port_bwd_pos0 rerope_bwd.cl "-DDT=f32 -DD=64 $P -DROTARY=0 -DQPOS=1 -DKPOS=1"
rr rr_port_fwd_ct4  rerope.cl     "-DDT=f32 -DD=24 -DRR_MMA=0 -DBM=16 -DBN=32 -DWG=64 -DCT=4 -DROTARY=1"
rr rr_port_bwd_ct4  rerope_bwd.cl "-DDT=f32 -DD=24 -DRR_MMA=0 -DBM=16 -DBN=32 -DWG=64 -DCT=4 -DROTARY=1"
rr rr_port_bwd_wide rerope_bwd.cl "-DDT=bf16 -DD=96 -DRR_MMA=0 -DBM=16 -DBN=16 -DWG=64 -DCT=8 -DROTARY=0"
rr merge_split  merge.cl      "-DP0_DT=f32 -DP_DT=f32 -DO_DT=f16 -DNARGS=1 -DVEC=4 -DALIGNED=1"
rr merge_8      merge.cl      "-DP0_DT=f16 -DP_DT=f16 -DO_DT=f16 -DNARGS=8 -DVEC=4 -DALIGNED=1"
ls "$out" | wc -l
