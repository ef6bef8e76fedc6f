#!/usr/bin/env bash
# `ordo trace check` on recorded runs: a chaos run of the offload config passes; each edge that
# faults.drop_edge removes from the step protocol is found and named (DESIGN §2.1); a file cut
# short is checked up to its cut.
set -u
ordo=${1:?usage: cli_trace_check.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A demo run of the offload config with chaos, recorded to $tmp/NAME.trace. 24 blocks: units the
# pool gives back (cleared) are soon reused by host-tier loads, so a load racing the clears of its
# own step shows (with 512 blocks the demo's loads only ever land on fresh units).
record() { # NAME [--set ...]
  local name=$1; shift
  timeout 120 "$ordo" demo --config configs/offload.toml --set device.chaos_seed=3 --set cache.num_blocks=24 "$@" \
    --trace "$tmp/$name.trace" >"$tmp/$name.demo" 2>&1
}

# The five runs record at once (a demo run mostly waits: ~17 s each alone, on 2 cores).
edges="clear_load load_forward forward_save upload_compute"
record clean & pids="$!"
for edge in $edges; do
  record "$edge" --set faults.drop_edge="$edge" & pids="$pids $!"
done
set -- clean $edges
for pid in $pids; do
  wait "$pid"
  rc=$?
  if [ "$1" = clean ]; then
    check "the clean demo run exits 0" test $rc -eq 0
  else # a dropped edge under chaos may change the digests: the demo then exits 1
    check "the demo run with drop_edge=$1 ends (exit 0 or 1)" test $rc -le 1
  fi
  check "the demo run $1 left a trace" test -s "$tmp/$1.trace"
  shift
done

timeout 60 "$ordo" trace check "$tmp/clean.trace" >"$tmp/out" 2>"$tmp/err"
check "a clean run checks with exit 0" test $? -eq 0
check "a clean run reports no violation" \
  grep -qE '^trace check: [0-9]+ records \([0-9]+ messages, [0-9]+ device ops, [0-9]+ steps\): no violation$' "$tmp/out"
check "a clean run matches every received message to its send (no warning)" test ! -s "$tmp/err"

for pair in clear_load:clear_before_load load_forward:load_before_use forward_save:produce_before_save \
            upload_compute:upload_before_compute; do
  edge=${pair%%:*} rule=${pair#*:}
  timeout 60 "$ordo" trace check "$tmp/$edge.trace" >"$tmp/out" 2>"$tmp/err"
  check "drop_edge=$edge: check exits 1" test $? -eq 1
  check "drop_edge=$edge: names $rule" \
    grep -q "^trace check: VIOLATION $rule: record [0-9]* (.*) does not happen before record [0-9]* (" "$tmp/out"
  check "drop_edge=$edge: gives advice" grep -q "^advice: " "$tmp/out"
done

size=$(stat -c %s "$tmp/clean.trace")
head -c $((size * 2 / 3)) "$tmp/clean.trace" >"$tmp/cut.trace"
timeout 60 "$ordo" trace check "$tmp/cut.trace" >"$tmp/out" 2>"$tmp/err"
check "a cut file checks with exit 0" test $? -eq 0
check "a cut file reports the cut" grep -qE '; file cut short after record [0-9]+: checked up to there$' "$tmp/out"

timeout 60 "$ordo" trace check "$tmp/no_such.trace" >"$tmp/out" 2>"$tmp/err"
check "a missing file exits 2" test $? -eq 2
check "a missing file is named" grep -q "no_such.trace" "$tmp/err"

finish
