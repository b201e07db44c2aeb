# Sourced by the tools/gpu_session*.sh scripts after tools/gpu_env.sh: OUT,
# B (the carried binaries) and suite NAME CMD...: runs one test suite, its
# summary line into $OUT/summary.txt (and stdout), its failures into
# $OUT/tests.txt.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
B=${B:-./build-gpubin/new}
: > $OUT/tests.txt
suite() { local name=$1; shift
  "$@" > /tmp/suite.txt 2>&1
  echo "$name rc=$? $(grep -E '^ +(tests|asserts)' /tmp/suite.txt | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  { echo "===== $name"; grep -E "FAIL|failed|Test:" /tmp/suite.txt | grep -v "passed$" | head -40; } >> $OUT/tests.txt
}
