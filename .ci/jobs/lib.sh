# Sourced by the jobs: the main build (shared by the jobs that test it) and
# meson test with its log registered for .ci/run's closing count.
set -euo pipefail

# The main build: the README's, with the tests, CLBlast and the AMD check
# required (a missing package fails instead of switching a part off).
MAIN=build-ci/main
main_build() {
  local opts=(-Dtests=enabled -Dclblast=enabled -Damd_check=enabled)
  if [ -f "$MAIN/build.ninja" ]; then
    meson setup --reconfigure "$MAIN" "${opts[@]}"
  else
    meson setup "$MAIN" "${opts[@]}"
  fi
  ninja -C "$MAIN"
}

# meson_test BUILD LOG [meson test arguments]: the log goes to
# BUILD/meson-logs/LOG.json; prints the wall and CPU seconds it took (CPU:
# of every test process, what two cores share); returns meson test's status.
meson_test() {
  local build=$1 log=$2 rc=0
  local TIMEFORMAT="meson test $log: %R s wall, %U s user + %S s sys CPU"
  shift 2
  time meson test -C "$build" --logbase "$log" --print-errorlogs "$@" || rc=$?
  case $build in /*) ;; *) build=$PWD/$build ;; esac
  echo "$build/meson-logs/$log.json" >> "$CI_TESTLOGS"
  return $rc
}

# step CMD...: runs one command of a job, says so if it failed, and
# counts it in $failed (the job's status at the end).
failed=0
step() {
  echo "== $*"
  if ! "$@"; then
    echo "FAILED: $*"
    failed=$((failed + 1))
  fi
}
