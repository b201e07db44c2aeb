#!/bin/bash
. tools/gpu_env.sh
B=./build-gpu
CLATTN_TEST_ONLY=quantized $B/tests/test_decode > /tmp/tq.txt 2>&1; echo "quant tests rc=$? $(grep -E '^ +asserts' /tmp/tq.txt)"
r() { $B/clattn run decode "$@" --heads 32 --kv-heads 8 --head-dim 128 --dtype f16 --repeat 20 --no-check 2>&1 | grep -E "^time" | cut -c1-22; }
for cfg in "decode_mma_stage=0" "decode_mma_stage=1" "decode_mma_stage=1,decode_mma_blocks=2" "decode_mma_stage=1,decode_mma_blocks=4"; do
  echo "$cfg" | tr ',' '\n' > /tmp/tune.txt
  echo "int4 $cfg: $(CLATTN_TUNING_FILE=/tmp/tune.txt r --batch 64 --ctx 32768 --kv-dtype int4)"
  echo "int4 p16 $cfg: $(CLATTN_TUNING_FILE=/tmp/tune.txt r --batch 64 --ctx 32768 --kv-dtype int4 --paged --page-size 16)"
done
echo "f16: $(r --batch 64 --ctx 32768)"
