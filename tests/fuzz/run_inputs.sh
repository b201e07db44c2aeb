#!/bin/sh
# Runs the fuzzer binary once on every file of the given folders (the
# committed corpus, regressions/, findings/): the regression test, and a
# check of a fix. Exits non-zero at the first input that fails.
set -eu
bin=$1
shift
files=$(find "$@" -type f ! -name '*.md' 2>/dev/null | sort)
if [ -z "$files" ]; then
  echo "no inputs in $*"
  exit 0
fi
# shellcheck disable=SC2086
exec "$bin" -runs=1 $files
