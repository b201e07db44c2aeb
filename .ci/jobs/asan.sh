#!/usr/bin/env bash
# CI job: every suite but the offline AMD compile under AddressSanitizer and
# UndefinedBehaviorSanitizer (any report fails: -fno-sanitize-recover), in its
# own folder (build-asan). The suites' buffers sit between guard bytes, so a
# kernel's stray write fails them as an ASan report fails the host code.
# LeakSanitizer is on for clattn and the tests; PoCL's and the ICD loader's
# own allocations at exit are suppressed (.ci/lsan.supp says which and why).
# Needs the packages .ci/run installs; kernels come from PoCL's cache of the
# main job (.ci/run: CACHES_OF). Runs from any folder; exits non-zero on failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. .ci/jobs/lib.sh

export CLATTN_DEVICE="${CLATTN_DEVICE:-Portable Computing Language}"
export CI="${CI:-true}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$PWD/.ci/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

dir=build-asan
opts=(-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
  -Dc_args=-fno-sanitize-recover=all -Dclblast=enabled -Damd_check=disabled -Dexamples=enabled
  -Dtests=enabled)
if [ -d "$dir" ]; then
  meson setup --reconfigure "$dir" "${opts[@]}"
else
  meson setup "$dir" "${opts[@]}"
fi
ninja -C "$dir"
# the suites (threads and leak have their own jobs with TSan and RSS bounds;
# under ASan they still run, for memory errors), then the CLI on the same build
step meson_test "$dir" asan --no-rebuild --no-suite amd --no-suite amd-full
step bash .ci/jobs/cli.sh "$dir"
exit $((failed > 0))
