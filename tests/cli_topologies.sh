#!/usr/bin/env bash
# `ordo topo run` (docs/topologies.md): every configs/topologies/*.toml passes; an invalid file
# exits 2 naming the problem; a failing expectation exits 1 with FAIL; a process that fails to
# start fails the run; SIGTERM of the runner stops it and its processes; no process the runner
# started is left after any run (the pids it prints). Runs from the repository root.
set -u
ordo=${1:?usage: cli_topologies.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_topo_runner
last_line_matches() { tail -n 1 "$1" | grep -qE "$2"; }

# --- every shipped topology passes ---------------------------------------------------------
for topo in configs/topologies/*.toml; do
  name=$(basename "$topo" .toml)
  timeout 300 "$ordo" topo run "$topo" >"$tmp/$name.out" 2>"$tmp/$name.err"
  code=$?
  check "$name: exits 0" test "$code" -eq 0
  check "$name: last line is N passed, 0 failed" last_line_matches "$tmp/$name.out" '^[1-9][0-9]* passed, 0 failed$'
  check "$name: no FAIL line" bash -c '! grep -q "^FAIL" "$1"' _ "$tmp/$name.out"
  check "$name: every step printed a line" \
    test "$(grep -cE '^(ok  |FAIL) ' "$tmp/$name.out")" -eq "$(grep -c '^\[\[step\]\]' "$topo")"
  check "$name: started processes and named their pids" grep -qE '^     start .*: pid [0-9]+ http://' "$tmp/$name.out"
  check "$name: no process left" no_process_left "$tmp/$name.out"
  dir=$(logs_dir "$tmp/$name.out")
  check "$name: its logs directory is removed after a pass" test -n "$dir" -a ! -e "$dir"
  if [ "$code" -ne 0 ]; then cat "$tmp/$name.out" "$tmp/$name.err"; fi
done
# restart keeps a process's ports (store_restart restarts node a).
first=$(sed -nE 's|^     start node a: pid [0-9]+ (http://[^ ]+)$|\1|p' "$tmp/store_restart.out")
again=$(sed -nE 's|^ok   [0-9]+ restart node a: .*; pid [0-9]+ (http://[^ ]+)$|\1|p' "$tmp/store_restart.out")
check "restart keeps the node's HTTP port ($first, $again)" test -n "$first" -a "$first" = "$again"

# --- invalid files: exit 2, the problem named, nothing started -------------------------------
cat >"$tmp/unknown_key.toml" <<'EOF'
[[node]]
name = "a"
confg = "configs/default.toml"
EOF
timeout 20 "$ordo" topo run "$tmp/unknown_key.toml" >"$tmp/out" 2>"$tmp/err"
check "an unknown key exits 2" test $? -eq 2
check "an unknown key is named with its line and the allowed keys" \
  grep -qF 'unknown_key.toml: line 3: unknown key "confg" in [[node]] (allowed: name, config, set, start)' "$tmp/err"
check "an invalid file prints nothing on stdout" test ! -s "$tmp/out"

cat >"$tmp/no_name.toml" <<'EOF'
[[store]]
name = "s"

[[node]]
config = "configs/default.toml"
EOF
timeout 20 "$ordo" topo run "$tmp/no_name.toml" >"$tmp/out" 2>"$tmp/err"
check "a missing name exits 2" test $? -eq 2
check "a missing name is named with its line" grep -qF 'no_name.toml: line 4: [[node]] has no name' "$tmp/err"

cat >"$tmp/bad_step.toml" <<'EOF'
[[node]]
name = "a"
config = "configs/default.toml"
set = ["store.address={store.nope.tcp}"]

[[step]]
send = { node = "a", prompt = "hi" }
expect = { digest = "same_as:later" }
EOF
timeout 20 "$ordo" topo run "$tmp/bad_step.toml" >"$tmp/out" 2>"$tmp/err"
check "a placeholder naming no process exits 2" test $? -eq 2
check "the placeholder is named" grep -qF '{store.nope.tcp} names no [[store]]' "$tmp/err"
sed -i '/store.nope/d' "$tmp/bad_step.toml"
timeout 20 "$ordo" topo run "$tmp/bad_step.toml" >"$tmp/out" 2>"$tmp/err"
check "same_as naming no earlier step exits 2" test $? -eq 2
check "the missing step is named" grep -qF 'line 7: [[step]] 1.expect.digest = "same_as:later": no earlier send step is named "later"' "$tmp/err"

printf '[[step]]\nkill = "a"\nstop = "a"\n' >"$tmp/two_actions.toml"
timeout 20 "$ordo" topo run "$tmp/two_actions.toml" >"$tmp/out" 2>"$tmp/err"
check "a step with two actions exits 2" test $? -eq 2
check "the two actions are named" grep -qF '(it has stop, kill)' "$tmp/err"

printf '[[node]\nname = "a"\n' >"$tmp/syntax.toml"
timeout 20 "$ordo" topo run "$tmp/syntax.toml" >"$tmp/out" 2>"$tmp/err"
check "a TOML syntax error exits 2" test $? -eq 2
check "the syntax error names its line" grep -qE 'syntax.toml: line 1: TOML syntax error' "$tmp/err"

timeout 20 "$ordo" topo run "$tmp/no_such.toml" >"$tmp/out" 2>"$tmp/err"
check "a missing file exits 2" test $? -eq 2

# --- a failing expectation: exit 1, FAIL, M >= 1, logs kept, nothing left --------------------
cat >"$tmp/wrong.toml" <<'EOF'
[[node]]
name = "a"
config = "configs/offload.toml"

[[step]]
name = "cold"
send = { node = "a", prompt = { tokens = 300, seed = 4 }, max_tokens = 4 }

[[step]]
name = "again"
send = { node = "a", prompt = { tokens = 300, seed = 4 }, max_tokens = 4 }
expect = { resume_at = 12345, digest = "differs_from:cold" }

[[step]]
name = "still-fine"
send = { node = "a", prompt = { tokens = 300, seed = 4 }, max_tokens = 4 }
expect = { status = 200, "from.hbm" = ">0", digest = "same_as:cold" }
EOF
timeout 300 "$ordo" topo run "$tmp/wrong.toml" >"$tmp/out" 2>"$tmp/err"
check "a failing expectation exits 1" test $? -eq 1
check "the failed step says what differed" \
  grep -qE '^FAIL 2 again: resume_at = [0-9]+, expected 12345; digest = [0-9a-f]+, expected to differ from cold$' "$tmp/out"
check "the other steps pass" test "$(grep -c '^ok   ' "$tmp/out")" -eq 2
check "the last line counts the failure" last_line_is "$tmp/out" "2 passed, 1 failed"
check "a failed run keeps its logs and names them" grep -qE '^     logs kept in ' "$tmp/out"
dir=$(logs_dir "$tmp/out")
check "the kept logs hold the node's stderr" bash -c 'ls "$1"/*-a.err >/dev/null' _ "$dir"
check "no process left after a failed run" no_process_left "$tmp/out"
check "the node was stopped with SIGTERM and drained" grep -q "ordo node: stopped" "$dir"/01-a.err
rm -rf "$dir"

# --- a process that does not start: the start fails, the steps are not run -------------------
cat >"$tmp/no_start.toml" <<'EOF'
[[node]]
name = "a"
config = "configs/default.toml"

[[node]]
name = "broken"
config = "configs/default.toml"
set = ["cache.block_size=3"]

[[step]]
send = { node = "a", prompt = "hi", max_tokens = 2 }
EOF
timeout 300 "$ordo" topo run "$tmp/no_start.toml" >"$tmp/out" 2>"$tmp/err"
check "a process that cannot start exits 1" test $? -eq 1
check "the failed start is named with the process's reason" \
  grep -qE '^FAIL start node broken: exit 2 before its ready line: .*cache.block_size' "$tmp/out"
check "the steps are reported as not run" grep -qF 'FAIL 1 send node a: not run (start node broken failed)' "$tmp/out"
check "the last line counts the failed start and the step" last_line_is "$tmp/out" "0 passed, 2 failed"
check "no process left after a failed start" no_process_left "$tmp/out"
rm -rf "$(logs_dir "$tmp/out")"

# --- SIGTERM of the runner: it stops its processes and exits 143 ------------------------------
{
  printf '[[store]]\nname = "s"\nset = ["store.capacity_mb=16"]\n\n'
  printf '[[node]]\nname = "a"\nconfig = "configs/offload.toml"\n'
  printf 'set = ["kv_transfer.connector=store", "store.address={store.s.tcp}"]\n\n'
  for i in $(seq 1 400); do
    printf '[[step]]\nsend = { node = "a", prompt = { tokens = 16, seed = %d }, max_tokens = 2000 }\n' "$i"
  done
} >"$tmp/long.toml"
"$ordo" topo run "$tmp/long.toml" >"$tmp/out" 2>"$tmp/err" &
runner=$!
for _ in $(seq 1 600); do grep -q '^ok   1 ' "$tmp/out" && break; sleep 0.1; done
check "the long run got going" grep -q '^ok   1 ' "$tmp/out"
kill -TERM "$runner"
code=124
for _ in $(seq 1 600); do
  if ! kill -0 "$runner" 2>/dev/null; then wait "$runner"; code=$?; break; fi
  sleep 0.1
done
if [ "$code" -eq 124 ]; then kill -KILL "$runner" 2>/dev/null; fi
runner=
check "SIGTERM stops the runner with 143 within 60 s" test "$code" -eq 143
check "the interrupted steps are failures" grep -qF 'not run (interrupted by SIGTERM)' "$tmp/out"
check "the last line is still the summary" last_line_matches "$tmp/out" '^[0-9]+ passed, [1-9][0-9]* failed$'
check "no process left after SIGTERM" no_process_left "$tmp/out"
dir=$(logs_dir "$tmp/out")
check "the node and the store were stopped with SIGTERM" \
  bash -c 'grep -q "ordo node: SIGTERM" "$1"/02-a.err && grep -q "ordo store: SIGTERM: stopping" "$1"/01-s.err' _ "$dir"
rm -rf "$(logs_dir "$tmp/out")"

finish
