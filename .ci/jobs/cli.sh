#!/usr/bin/env bash
# Every `clattn` subcommand and mode on small shapes, each checked against
# its reference by the CLI itself (exit status 1 on a failed check): a broken
# CLI path cannot land. Usage: .ci/jobs/cli.sh [build dir] (default build-ci/main).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin="${1:-build-ci/main}/clattn"
[ -x "$bin" ] || { echo "cli: $bin not built"; exit 1; }
export CLATTN_DEVICE="${CLATTN_DEVICE:-Portable Computing Language}"

ok=0 bad=0
run() {
  local t0=$SECONDS
  if out=$("$bin" "$@" 2>&1); then
    ok=$((ok + 1)); echo "ok   ($((SECONDS - t0)) s) clattn $*"
  else
    bad=$((bad + 1)); echo "FAIL ($((SECONDS - t0)) s) clattn $*"; echo "$out" | tail -20
  fi
}
# usage errors must exit 2, not 0 or 1
usage() {
  "$bin" "$@" >/dev/null 2>&1
  local rc=$?
  if [ $rc -eq 2 ]; then ok=$((ok + 1)); echo "ok   (exit 2) clattn $*"
  else bad=$((bad + 1)); echo "FAIL (exit $rc, want 2) clattn $*"; fi
}

R="--repeat 1 --warmup 0"
run devices
# --json: one object per device that parses, with the profile's features
devices_json() {
  "$bin" devices --json | python3 -c 'import json, sys
for line in sys.stdin:
    d = json.loads(line)
    assert {"nv_ptx", "amd_builtins", "cpu_prefetch", "f32_denormals"} <= set(d["features"]), d.get("features")
    assert d["params"], "no tuning values"'
}
if devices_json; then ok=$((ok + 1)); echo "ok   clattn devices --json"
else bad=$((bad + 1)); echo "FAIL clattn devices --json"; fi
run --help
for c in decode merge rerope quant; do run run $c --help; done
usage run nosuch
usage run decode --heads abc
usage run decode --no-such-flag

D="--batch 2 --heads 4 --kv-heads 2 --head-dim 64 --ctx 100 $R --lse"
for dt in f32 f16 bf16; do run run decode $D --dtype $dt; done
for kv in int4 int4g2 int4g4 int4g8 fp8 fp8fnuz; do run run decode $D --dtype f16 --kv-dtype $kv; done
run run decode $D --dtype f16 --kv-dtype f32
run run decode $D --q-len 3 --causal --bias
run run decode $D --paged --page-size 16 --varlen
run run decode $D --paged --page-size 32 --kv-dtype int4 --q-len 2 --causal
run run decode $D --varlen --q-len 3 --kv-dtype fp8
run run decode $D --splits 3
run run decode $D --splits 1 --scale 0.2
run run decode $D --no-flush --json
run run decode $D --baseline
run run decode $D --check --head-dim 96
run run decode $D --devices 0,0
run run decode $D --no-check
# above --ref-limit: the first and the last sequence checked, not the check skipped
if out=$("$bin" run decode $D --batch 5 --ref-limit 150000) &&
  grep -q "sequences 0 and B-1: .*PASS" <<< "$out"; then
  ok=$((ok + 1)); echo "ok   clattn run decode --ref-limit (the ends checked)"
else bad=$((bad + 1)); echo "FAIL clattn run decode --ref-limit (the ends checked)"; fi

M="--batch 2 --m 2 --heads 4 --head-dim 32 $R"
run run merge $M --n 3
run run merge $M --n 20 --dtype f16 --out-dtype bf16 --backward
run run merge $M --n 5 --stacked --no-lse
run run merge $M --n 40 --stacked --dtype bf16 --backward
run run merge --split-devices 0,0 --batch 2 --heads 4 --kv-heads 2 --head-dim 64 --ctx 300 $R
run run merge --split-devices 0,0 --separate-contexts --batch 1 --q-len 2 --heads 4 --kv-heads 2 --head-dim 64 --ctx 300 --dtype f16 --partial-dtype f16 $R

X="--z 1 --heads 4 --kv-heads 2 --n 96 --head-dim 32 --window 17 $R"
for dt in f32 f16 bf16; do run run rerope $X --dtype $dt; done
run run rerope $X --causal
run run rerope $X --backward
run run rerope $X --causal --backward --dtype f32
run run rerope $X --n-k 120 --causal
run run rerope $X --on-the-fly
run run rerope $X --on-the-fly --interleaved --backward --theta 500000
run run rerope $X --window 0 --scale 0.3
run run rerope $X --ref-limit 1000 --backward
run run rerope $X --no-check

Q="--rows 200 --heads 2 --head-dim 64 $R"
for kv in int4 int4g2 int4g4 int4g8 fp8 fp8fnuz; do run run quant $Q --kv-dtype $kv; done
run run quant $Q --dtype f32 --json
run run quant $Q --dtype bf16 --no-check

# the tuner end to end: it writes a file naming this device, a new context
# reads it (devices --params says so) and its decode_wg reaches decode's build
# options; a file of another device is reported and ignored
tune_check() {
  local dir f wg log
  dir=$(mktemp -d) f="$dir/tuning.txt"
  "$bin" tune --quick --family decode --out "$f" || return 1
  grep -q '^device=' "$f" && grep -q '^clattn_version=' "$f" || { echo "no header in $f"; return 1; }
  wg=$(sed -n 's/^decode_wg=//p' "$f")
  log=$(CLATTN_TUNING_FILE="$f" "$bin" devices --params --device "$CLATTN_DEVICE" 2>&1)
  grep -qE "decode_wg +$wg +override file" <<<"$log" || { echo "devices --params does not show the file"; return 1; }
  # decode_wg sizes the work-group kernel (a CPU's row takes the serial form, built for one work-item)
  grep -q '^decode_serial=' "$f" && sed -i 's/^decode_serial=.*/decode_serial=0/' "$f" || echo decode_serial=0 >> "$f"
  log=$(CLATTN_TUNING_FILE="$f" CLATTN_LOG=debug CLATTN_CACHE_DIR="$dir/cache" \
    "$bin" run decode --batch 1 --heads 4 --kv-heads 2 --head-dim 64 --ctx 100 $R 2>&1)
  grep -q -- "decode.cl \[.*-DWG=$wg " <<<"$log" || { echo "decode_wg=$wg is not in decode's build options"; return 1; }
  sed -i 's/^device=.*/device=Some Other GPU/' "$f"
  log=$(CLATTN_TUNING_FILE="$f" "$bin" devices --params --device "$CLATTN_DEVICE" 2>&1)
  grep -q 'written for device "Some Other GPU", not this one' <<<"$log" || { echo "a foreign file was not reported"; return 1; }
  rm -rf "$dir"
}
run tune --help
run tune --quick --family merge --dry-run
run tune --quick --family quant --dry-run
run tune --quick --family rerope --dry-run
CLATTN_FORCE_MMA=1 run tune --quick --family rerope-bwd --dry-run
usage tune --family nosuch
t0=$SECONDS
if out=$(tune_check 2>&1); then ok=$((ok + 1)); echo "ok   ($((SECONDS - t0)) s) clattn tune --quick (file, --params, build options, foreign file)"
else bad=$((bad + 1)); echo "FAIL clattn tune --quick"; echo "$out" | tail -30; fi

echo "cli: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
