# Session 28's second H200 call: the two-phase backward's kernels apart, its tiles and rings, and at D=64.
. tools/gpu_env.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
printf "rerope_bwd_block_m=32\nrerope_bwd_block_n=32\n" > /tmp/p2.txt  # (then rerope_bwd_phases=2, which took tiles of 32 at D=64)
printf 'rerope_bwd_stages=1\nrerope_bwd_block_n=64\n' > /tmp/s1.txt
printf 'rerope_bwd_qring=1\nrerope_bwd_block_m=32\n' > /tmp/qr32.txt
printf 'rerope_bwd_qring=1\nrerope_bwd_block_m=16\n' > /tmp/qr16.txt
printf 'rerope_bwd_qring=1\n' > /tmp/qr.txt
printf 'rerope_bwd_phases=2\nrerope_bwd_qring=1\n' > /tmp/p2qr.txt
REPEAT=${REPEAT:-3} bash tools/gpu_ab_cl.sh tools/sweeps/rr_phased2.txt
