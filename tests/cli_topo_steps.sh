#!/usr/bin/env bash
# `ordo topo run` steps pause / resume / sleep_ms / metric and send's kv_transfer_params
# (docs/topologies.md) on tests/data/topo_*.toml: a file using every one passes (a P/D flow by
# hand, a node left paused stopped cleanly); failing metrics and a `from:` step without
# kv_transfer_params exit 1 naming what differed; invalid steps exit 2. Hostile files (a
# 30,000-character name, config = "/dev/zero", a nested placeholder, files over 1 MiB, a topology
# that is /dev/zero) exit 2 within 5 s, under 100 MB, with one line on stderr and nothing started.
# Runs from the repository root.
set -u
ordo=${1:?usage: cli_topo_steps.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_topo_runner
# The state letter of /proc/PID/stat (T = stopped).
proc_state() { sed -E 's/^.*\) (.).*$/\1/' "/proc/$1/stat" 2>/dev/null; }
# Waits up to 120 s for a line matching $2 in file $1 (the runner still running).
wait_line() {
  for _ in $(seq 1 1200); do grep -qE "$2" "$1" && return 0; sleep 0.1; done
  echo "no line matching $2 in $1"; cat "$1"
  return 1
}

# --- every new step passes; the paused node is stopped during sleep_ms; cleanup resumes it -----
out=$tmp/steps.out
"$ordo" topo run tests/data/topo_steps.toml >"$out" 2>"$tmp/steps.err" &
runner=$!
paused_state=
if wait_line "$out" '^ok   5 pause node p: pid [0-9]+ stopped \(SIGSTOP\)$'; then
  paused_state=$(proc_state "$(sed -nE 's/^ok   5 pause node p: pid ([0-9]+) .*/\1/p' "$out")")
fi
wait_exit "$runner" 300
if [ "$code" -eq 124 ]; then kill -KILL "$runner" 2>/dev/null; fi
runner=
check "topo_steps: exits 0" test "$code" -eq 0
check "topo_steps: 11 passed, 0 failed" last_line_is "$out" "11 passed, 0 failed"
check "topo_steps: p is stopped (state T) during sleep_ms (was '$paused_state')" test "$paused_state" = T
check "topo_steps: p is resumed" grep -qE '^ok   7 resume node p: pid [0-9]+ continued \(SIGCONT\)$' "$out"
check "topo_steps: a send prints the node's duration_ms and first_token_ms and the runner's wall_ms" \
  grep -qE '^ok   1 ref: send node ref: 200 resume_at=0 digest=[0-9a-f]+ duration_ms=[0-9.]+ first_token_ms=[0-9.]+ wall_ms=[0-9]+$' "$out"
check "topo_steps: a metric with labels prints the value found" \
  grep -qxF 'ok   2 metric node ref: ordo_requests_total{status="ok"} = 1' "$out"
check "topo_steps: a metric without labels is the unlabelled sample" \
  grep -qxF 'ok   3 metric node ref: ordo_generation_tokens_total = 2' "$out"
check "topo_steps: the prefill answer's kv_transfer_params are printed" \
  grep -qE '^ok   4 prefill-step: send node p: 200 .*kv_transfer_params=\{.*"remote_port":[1-9][0-9]*.*"transfer_id":' "$out"
check "topo_steps: sleep_ms passes" grep -qxF 'ok   6 sleep_ms 3000' "$out"
check "topo_steps: the decode with from:prefill-step pulled from p (running again)" \
  grep -qE '^ok   8 decode-step: send node d: 200 .*from\.peer=[1-9][0-9]* ' "$out"
check "topo_steps: d left paused at the end" grep -qE '^ok   11 pause node d: pid [0-9]+ stopped' "$out"
check "topo_steps: no FAIL line (the paused d stopped on SIGTERM)" bash -c '! grep -q "^FAIL" "$1"' _ "$out"
check "topo_steps: no process left" no_process_left "$out"
dir=$(logs_dir "$out")
check "topo_steps: its logs directory is removed after a pass" test -n "$dir" -a ! -e "$dir"
if [ "$code" -ne 0 ]; then cat "$out" "$tmp/steps.err"; fi

# --- metrics that do not match: exit 1, each FAIL names what /metrics has ---------------------
out=$tmp/metric.out
timeout 300 "$ordo" topo run tests/data/topo_metric_fail.toml >"$out" 2>"$tmp/err"
check "topo_metric_fail: exits 1" test $? -eq 1
check "a wrong value names the value found" \
  grep -qxF 'FAIL 2 metric node a: ordo_requests_total{status="ok"} = 1, expected 5' "$out"
check "absent labels name the samples of that name" \
  grep -qE '^FAIL 3 metric node a: ordo_requests_total\{status="nope"\} absent; ordo_requests_total has: .*ordo_requests_total\{status="ok"\} 1' "$out"
check "an absent name is a failure, not 0" \
  grep -qxF 'FAIL 4 metric node a: ordo_no_such_total absent: /metrics has no sample named ordo_no_such_total' "$out"
check "a matching bound passes" grep -qxF 'ok   5 metric node a: ordo_requests_total{status="ok"} = 1' "$out"
check "topo_metric_fail: 2 passed, 3 failed" last_line_is "$out" "2 passed, 3 failed"
check "topo_metric_fail: no process left" no_process_left "$out"
rm -rf "$(logs_dir "$out")"

# --- from: a step without kv_transfer_params, a send to a paused node: exit 1 -----------------
out=$tmp/from.out
timeout 300 "$ordo" topo run tests/data/topo_from_fail.toml >"$out" 2>"$tmp/err"
check "topo_from_fail: exits 1" test $? -eq 1
check "from: a step whose answer has no kv_transfer_params fails naming it" \
  grep -qxF 'FAIL 2 send node a: kv_transfer_params = "from:plain": step plain'"'"'s answer (status 200) has no kv_transfer_params object' "$out"
check "a send to a paused node fails at once" \
  grep -qE '^FAIL 4 send node a: node a is paused \(pid [0-9]+, SIGSTOP\): resume it first$' "$out"
check "after resume the node answers" grep -qE '^ok   6 send node a: 200 ' "$out"
check "a kv_transfer_params. path the answer lacks fails" \
  grep -qxF 'FAIL 7 send node a: kv_transfer_params.remote_port = missing, expected >0' "$out"
check "topo_from_fail: 4 passed, 3 failed" last_line_is "$out" "4 passed, 3 failed"
check "topo_from_fail: no process left" no_process_left "$out"
rm -rf "$(logs_dir "$out")"

# --- invalid files: exit 2 naming the step and line, nothing started --------------------------
timeout 20 "$ordo" topo run tests/data/topo_bad_key.toml >"$tmp/out" 2>"$tmp/err"
check "an unknown step key exits 2" test $? -eq 2
check "the unknown step key is named with its line and the allowed keys" \
  grep -qF 'topo_bad_key.toml: line 8: unknown key "pauze" in [[step]] 1 (allowed: name, send, start, stop, kill, restart, pause, resume, sleep_ms, evict, metric, expect_start_failure, expect)' "$tmp/err"
check "an invalid file starts nothing" test ! -s "$tmp/out"

bad() { # NAME STEP-LINES EXPECTED-STDERR-TEXT
  printf '[[node]]\nname = "a"\nconfig = "configs/dense.toml"\n\n[[step]]\nname = "s1"\nsend = { node = "a", prompt = "hi" }\n\n[[step]]\n%s\n' "$2" >"$tmp/$1.toml"
  timeout 20 "$ordo" topo run "$tmp/$1.toml" >"$tmp/out" 2>"$tmp/err"
  local c=$?
  check "$1: exits 2" test "$c" -eq 2
  check "$1: names the problem" grep -qF "$3" "$tmp/err"
  if ! grep -qF "$3" "$tmp/err"; then cat "$tmp/err"; fi
}
bad sleep_zero 'sleep_ms = 0' 'line 10: [[step]] 2.sleep_ms = 0: must be between 1 and 600000'
bad sleep_long 'sleep_ms = 600001' 'must be between 1 and 600000'
bad metric_value 'metric = { node = "a", name = "ordo_requests_total", value = "=3" }' \
  'line 10: [[step]] 2.metric.value must be a number, ">N" or "<N"'
bad metric_bound 'metric = { node = "a", name = "ordo_requests_total", value = ">x" }' \
  '[[step]] 2.metric.value = ">x": expected a number after >'
bad metric_key 'metric = { node = "a", name = "ordo_requests_total", lable = { a = "b" } }' \
  'unknown key "lable" in [[step]] 2.metric (allowed: node, store, proxy, name, labels, value)'
bad metric_label 'metric = { node = "a", name = "ordo_requests_total", labels = { status = 200 } }' \
  '[[step]] 2.metric.labels.status must be a string'
bad metric_proc 'metric = { store = "a", name = "ordo_requests_total" }' '[[step]] 2.metric.store = "a" is a [[node]]'
bad from_unknown 'send = { node = "a", prompt = "hi", kv_transfer_params = "from:later" }' \
  'line 10: [[step]] 2.send.kv_transfer_params = "from:later": no earlier send step is named "later"'
bad kv_number 'send = { node = "a", prompt = "hi", kv_transfer_params = 3 }' \
  '[[step]] 2.send.kv_transfer_params must be a table { ... } or "from:STEP"'
bad pause_unknown 'pause = "nope"' 'line 10: pause "nope" names no [[store]], [[node]] or [[proxy]]'
bad kv_expect 'send = { node = "a", prompt = "hi" }
expect = { "kv_transfer_params.lease_ms" = ">y" }' \
  '[[step]] 2.expect.kv_transfer_params.lease_ms = ">y": expected a number after >'

bad step_name_long "name = \"$(head -c 30000 /dev/zero | tr '\0' s)\"
sleep_ms = 1" '[[step]] 2.name must be a string of 1 to 128 characters'

# --- hostile files (issue 35): exit 2 within 5 s, under 100 MB, one stderr line, nothing started --
# hostile NAME FILE EXPECTED-STDERR-TEXT
hostile() {
  local c=0 kb lines
  (ulimit -v 4194304; exec /usr/bin/time -f %M -o "$tmp/rss" timeout -s KILL 5 "$ordo" topo run "$2") \
    >"$tmp/out" 2>"$tmp/err" || c=$?
  kb=$(tail -1 "$tmp/rss")
  lines=$(grep -c '' "$tmp/err")
  check "$1: exits 2 within 5 s (exit $c)" test "$c" -eq 2
  check "$1: under 100 MB (max RSS $kb KB)" test "$kb" -lt 102400
  check "$1: one line on stderr ($lines)" test "$lines" -eq 1
  check "$1: names the problem" grep -qF "$3" "$tmp/err"
  if ! grep -qF "$3" "$tmp/err"; then head -c 600 "$tmp/err"; echo; fi
  check "$1: starts nothing" test ! -s "$tmp/out"
}
python3 -c 'print("[[node]]\nname = \"%s\"\nconfig = \"configs/dense.toml\"" % ("n" * 30000))' >"$tmp/long_name.toml"
hostile long_name "$tmp/long_name.toml" \
  "line 2: [[node]].name \"nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn... (30000 characters)\": use 1 to 128 letters"
hostile dev_zero_config tests/data/topo_hostile_dev_zero.toml \
  'line 4: [[node]] "a".config = "/dev/zero": not a regular file (a config is a regular file of at most 1 MiB)'
hostile nested_placeholder tests/data/topo_hostile_nested.toml \
  '[[proxy]] "x" set "proxy.decode={node.{node.n.http}.http}": {node.{node.n.http}.http}: a malformed placeholder'
hostile dev_zero_topology /dev/zero 'ordo topo run /dev/zero: not a regular file'
head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' '#' >"$tmp/big.toml"
hostile big_topology "$tmp/big.toml" 'over the limit of 1048576 bytes (1 MiB) for a topology file'
head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' '#' >"$tmp/big_config.toml"
printf '[[node]]\nname = "a"\nconfig = "%s"\n' "$tmp/big_config.toml" >"$tmp/big_config_topo.toml"
hostile big_config "$tmp/big_config_topo.toml" 'big_config.toml": 1048577 bytes (a config is a regular file of at most 1 MiB)'

# --- a runner killed by SIGKILL takes its processes with it (tools/harness/child_supervisor: PR_SET_PDEATHSIG)
out=$tmp/killed.out
"$ordo" topo run tests/data/topo_steps.toml >"$out" 2>/dev/null &
runner=$!
wait_line "$out" '^ok   1 ' >/dev/null
kill -KILL "$runner"
wait "$runner" 2>/dev/null
runner=
gone=1
for _ in $(seq 1 100); do
  gone=1
  for p in $(grep -oE 'pid [0-9]+' "$out" | cut -d' ' -f2); do kill -0 "$p" 2>/dev/null && gone=0; done
  [ "$gone" -eq 1 ] && break
  sleep 0.1
done
check "a SIGKILLed runner's nodes are gone within 10 s" test "$gone" -eq 1
for p in $(grep -oE 'pid [0-9]+' "$out" | cut -d' ' -f2); do kill -KILL "$p" 2>/dev/null; done

finish
