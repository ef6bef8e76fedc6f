#!/usr/bin/env bash
# `ordo node` as a user runs it: config errors, the ready line, curl, metrics, graceful stop.
set -u
ordo=${1:?usage: cli_node.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
pid=

# An invalid config stops the node before serving, naming the key, the value and what is allowed.
"$ordo" node --config configs/default.toml --set cache.block_size=48 --port 0 >"$tmp/out" 2>"$tmp/err"
check "invalid config exits 2" test $? -eq 2
check "invalid config names key and rule" grep -q "cache.block_size = 48: must be a power of two" "$tmp/err"
check "invalid config prints nothing on stdout" test ! -s "$tmp/out"
"$ordo" node --config configs/no_such_file.toml >"$tmp/out" 2>"$tmp/err"
check "missing config file exits 2" test $? -eq 2
check "missing config file is named" grep -q "no_such_file.toml" "$tmp/err"
"$ordo" node --config configs/default.toml --set model.preset=llama --port 0 >"$tmp/out" 2>"$tmp/err"
check "unknown preset lists the allowed ones" grep -q "dense" "$tmp/err"

# A node on a free port prints exactly one ready line on stdout.
"$ordo" node --config configs/dense.toml --port 0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 100); do grep -q listening "$tmp/out" 2>/dev/null && break; sleep 0.1; done
check "ready line is exact" grep -qE '^listening on http://127\.0\.0\.1:[0-9]+$' "$tmp/out"
check "stdout holds only the ready line" test "$(wc -l <"$tmp/out")" -eq 1
port=$(sed -E 's/.*:([0-9]+)$/\1/' "$tmp/out")
url=http://127.0.0.1:$port
curl_() { curl --noproxy '*' -s --max-time 60 "$@"; }
check "health" test "$(curl_ "$url/health")" = '{"status":"ok"}'
body=$(curl_ "$url/v1/completions" -d '{"prompt": "Hello from the command line test.", "max_tokens": 4}')
check "completion has choices" grep -q '"choices"' <<<"$body"
check "completion has an ordo digest" grep -qE '"logits_digest":"[0-9a-f]{16}"' <<<"$body"
status=$(curl_ -o /dev/null -w '%{http_code}' "$url/v1/completions" -d '{"prompt": 5}')
check "bad prompt type is a 400" test "$status" = 400
check "metrics are Prometheus text" grep -q '^ordo_requests_total{status="ok"} 1$' <<<"$(curl_ "$url/metrics")"
check "the request was logged" grep -q "request 1 finished: prompt 34 tokens" "$tmp/err"

# SIGTERM while a request is in flight: it completes, then the node exits 0.
# A 3500-token prefill takes seconds on the CPU device: the request is in flight when the signal lands.
long_prompt=$(head -c 3500 </dev/zero | tr '\0' 'a')
curl_ "$url/v1/completions" -d "{\"prompt\": \"$long_prompt\", \"max_tokens\": 4}" >"$tmp/drained" &
curl_pid=$!
for _ in $(seq 1 50); do # until the node has admitted it
  curl_ "$url/metrics" | grep -q '^ordo_num_requests_running 1$' && break
  sleep 0.05
done
kill -TERM $pid
wait $pid
check "SIGTERM exits 0" test $? -eq 0
wait $curl_pid
check "in-flight request completed during drain" grep -q '"prompt_tokens":3501' "$tmp/drained"
check "the drain was logged" grep -q "draining in-flight requests" "$tmp/err"
pid=

finish
