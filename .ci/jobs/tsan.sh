#!/usr/bin/env bash
# CI job: the threads suite under ThreadSanitizer. Eight threads on one
# clattn context build and run different kernel variants at once (the
# program cache holds no lock across a build; the test starts from an empty
# disk-cache folder of its own), then load them from that folder at once;
# any data race TSan sees in clattn or the test fails the job. Builds only
# that test, in its own folder (build-tsan); needs the packages .ci/run
# installs. Runs from any folder; exits non-zero on failure.
#
# No suppressions: PoCL, the ICD loader and LLVM are not instrumented, so
# TSan checks only the accesses of clattn and the test (it still sees their
# locks and threads through its interceptors), and it reported nothing on
# Debian 12's PoCL 3.1 and gcc 12.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

export CLATTN_DEVICE="${CLATTN_DEVICE:-Portable Computing Language}"
export CI="${CI:-true}"
# the first report ends the run with exit code 66, which fails the suite
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}"

dir=build-tsan
opts=(-Db_sanitize=thread -Dbuildtype=debugoptimized -Dclblast=disabled -Damd_check=disabled
  -Dexamples=disabled -Dtests=enabled)
if [ -d "$dir" ]; then
  meson setup --reconfigure "$dir" "${opts[@]}"
else
  meson setup "$dir" "${opts[@]}"
fi
ninja -C "$dir" tests/test_threads

# TSan maps its shadow memory at fixed addresses, which some kernels' wider
# mmap randomisation collides with ("unexpected memory mapping"): run with
# address randomisation off.
meson test -C "$dir" --no-rebuild --print-errorlogs --wrapper "setarch $(uname -m) -R" threads
