#!/usr/bin/env bash
# CI job: the libFuzzer target over argument validation and planning
# (tests/fuzz/README.md). Installs nothing: .ci/run installs the packages
# (clang, with libFuzzer from libclang-rt-14-dev, which clang-14 recommends).
# Builds the fuzzer in its own folder (build-fuzz), runs every committed input
# once (tests/fuzz/corpus and tests/fuzz/regressions), then fuzzes on a copy
# of the corpus inside build-fuzz, so nothing is written into the tree: by
# default $FUZZ_RUNS (100000) executions from seed $FUZZ_SEED (1), the same
# inputs on every run of one commit, so CI's verdict is reproducible (capped
# at 300 s, which only cuts the sequence short); with $FUZZ_SECONDS set, that
# long from a random seed, to explore. Prints the executions and the coverage;
# exits non-zero on any oracle failure or sanitizer report, leaving the input
# in build-fuzz/fuzz-artifacts/ (copy it to tests/fuzz/regressions/ once fixed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if [ -n "${FUZZ_SECONDS:-}" ]; then
  mode=(-max_total_time="$FUZZ_SECONDS")
  what="${FUZZ_SECONDS} s from a random seed"
else
  mode=(-seed="${FUZZ_SEED:-1}" -runs="${FUZZ_RUNS:-100000}" -max_total_time=300)
  what="${FUZZ_RUNS:-100000} runs from seed ${FUZZ_SEED:-1}"
fi
export CC="${FUZZ_CC:-clang}"
opts=(-Dfuzz=enabled -Dtests=disabled -Dexamples=disabled -Dclblast=auto -Damd_check=disabled)
if [ -d build-fuzz ]; then
  meson setup --reconfigure build-fuzz "${opts[@]}"
else
  meson setup build-fuzz "${opts[@]}"
fi
ninja -C build-fuzz tests/fuzz/fuzz_ops
bin=build-fuzz/tests/fuzz/fuzz_ops

echo "== fuzz: the committed inputs, once each"
if ! tests/fuzz/run_inputs.sh "$bin" tests/fuzz/corpus tests/fuzz/regressions >build-fuzz/inputs.log 2>&1; then
  grep -E "Running:|ORACLE|runtime error|ERROR: |SUMMARY" build-fuzz/inputs.log | tail -n 20
  echo "fuzz: FAILED on a committed input (full log: build-fuzz/inputs.log)"
  exit 1
fi
echo "fuzz: $(grep -c '^Executed' build-fuzz/inputs.log) committed inputs passed"

echo "== fuzz: ${what}, from the corpus"
rm -rf build-fuzz/fuzz-corpus build-fuzz/fuzz-artifacts
cp -r tests/fuzz/corpus build-fuzz/fuzz-corpus
mkdir -p build-fuzz/fuzz-artifacts
status=0
"$bin" "${mode[@]}" -timeout=30 -rss_limit_mb=3072 -print_final_stats=1 \
  -artifact_prefix=build-fuzz/fuzz-artifacts/ build-fuzz/fuzz-corpus >build-fuzz/fuzz.log 2>&1 || status=$?
grep -E "INITED|DONE|ORACLE|runtime error|ERROR: |SUMMARY|stat::(number_of_executed_units|average_exec_per_sec)" \
  build-fuzz/fuzz.log | tail -n 40 || true
if [ "$status" -ne 0 ]; then
  input=$(ls build-fuzz/fuzz-artifacts/ 2>/dev/null | head -n 1)
  echo "fuzz: FAILED (status $status); reproduce: $bin build-fuzz/fuzz-artifacts/$input"
  echo "      (full log: build-fuzz/fuzz.log)"
  exit 1
fi
echo "fuzz: passed"
