#!/usr/bin/env bash
# `ordo node` as a user runs it: usage and config errors, the ready line, curl, metrics, signals,
# graceful stop.
set -u
ordo=${1:?usage: cli_node.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
pid=

# An invalid config or command line stops the node before serving, naming the key or flag, the
# value and what is allowed (`timeout`: a node that wrongly starts must fail the check, not hang it).
"$ordo" node --config configs/default.toml --set cache.block_size=48 --port 0 >"$tmp/out" 2>"$tmp/err"
check "invalid config exits 2" test $? -eq 2
check "invalid config names key and rule" grep -q "cache.block_size = 48: must be a power of two" "$tmp/err"
check "invalid config prints nothing on stdout" test ! -s "$tmp/out"
"$ordo" node --config configs/no_such_file.toml >"$tmp/out" 2>"$tmp/err"
check "missing config file exits 2" test $? -eq 2
check "missing config file is named" grep -q 'config file "configs/no_such_file.toml": no such file' "$tmp/err"
timeout 20 "$ordo" node --config configs --port 0 >"$tmp/out" 2>"$tmp/err"
check "a directory as --config exits 2" test $? -eq 2
check "a directory as --config is named" grep -q 'config file "configs": is a directory; expected a TOML file' "$tmp/err"
for bad_port in -1 65536; do
  timeout 20 "$ordo" node --config configs/default.toml --port $bad_port >"$tmp/out" 2>"$tmp/err"
  check "--port $bad_port exits 2" test $? -eq 2
  check "--port $bad_port names the flag and the range" grep -q -- "--port $bad_port: must be between 0 and 65535" "$tmp/err"
  check "--port $bad_port prints nothing on stdout" test ! -s "$tmp/out"
done
timeout 20 "$ordo" node --config configs/default.toml --port abc >"$tmp/out" 2>"$tmp/err"
check "a usage error exits 2" test $? -eq 2
timeout 20 "$ordo" node --config configs/default.toml --set server.api_key="bad key" --port 0 >"$tmp/out" 2>"$tmp/err"
check "a bad secret exits 2" test $? -eq 2
check "a bad secret is refused without printing it" \
  bash -c 'grep -q "server.api_key (set, not shown)" "$1" && ! grep -q "bad key" "$1"' _ "$tmp/err"
version=$(timeout 20 "$ordo" --version)
check "--version exits 0" test $? -eq 0
check "--version prints version and commit" grep -qE '^ordo [0-9]+\.[0-9]+\.[0-9]+ \(([0-9a-f]{4,40}|unknown)\)$' <<<"$version"
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
# /health: the status and the node's engine identity (node-<16 hex>, SPEC D3).
check "health" grep -Eq '^\{"engine_id":"node-[0-9a-f]{16}","status":"ok"\}$' <<<"$(curl_ "$url/health")"
body=$(curl_ "$url/v1/completions" -d '{"prompt": "Hello from the command line test.", "max_tokens": 4}')
check "completion has choices" grep -q '"choices"' <<<"$body"
check "completion has an ordo digest" grep -qE '"logits_digest":"[0-9a-f]{16}"' <<<"$body"
status=$(curl_ -o /dev/null -w '%{http_code}' "$url/v1/completions" -d '{"prompt": 5}')
check "bad prompt type is a 400" test "$status" = 400
check "metrics are Prometheus text" grep -q '^ordo_requests_total{status="ok"} 1$' <<<"$(curl_ "$url/metrics")"
check "the request was logged" grep -q "request 1 finished: prompt 34 tokens" "$tmp/err"

# A tenant's cache_salt never reaches /metrics, and every exposition passes promtool.
curl_ "$url/v1/completions" -d '{"prompt": "Salted prompt.", "max_tokens": 2, "cache_salt": "tenant-7f3a-private-salt"}' >/dev/null
curl_ "$url/metrics" >"$tmp/metrics"
check "metrics carry no cache_salt" bash -c '! grep -q tenant-7f3a "$1"' _ "$tmp/metrics"
check "promtool finds no problem in /metrics" bash -c 'test -z "$(promtool check metrics <"$1" 2>&1)"' _ "$tmp/metrics"
check "the whole pool is capacity" grep -q '^ordo_hbm_blocks_capacity 512$' "$tmp/metrics"

# SIGHUP and SIGUSR1 are logged and ignored; SIGPIPE is ignored: the node keeps serving.
kill -HUP $pid
kill -USR1 $pid
kill -PIPE $pid
for _ in $(seq 1 50); do grep -q "SIGUSR1 ignored" "$tmp/err" && break; sleep 0.1; done
check "SIGHUP was logged" grep -q "SIGHUP ignored" "$tmp/err"
check "SIGUSR1 was logged" grep -q "SIGUSR1 ignored" "$tmp/err"
check "the node survives SIGHUP, SIGUSR1 and SIGPIPE" kill -0 $pid
check "health after the signals" grep -q '"status":"ok"' <<<"$(curl_ "$url/health")"

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

# server.host = "localhost" is resolved, not refused.
"$ordo" node --config configs/dense.toml --set server.host=localhost --port 0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 100); do grep -q listening "$tmp/out" 2>/dev/null && break; sleep 0.1; done
check "localhost: ready line" grep -qE '^listening on http://localhost:[0-9]+$' "$tmp/out"
port=$(sed -E 's/.*:([0-9]+)$/\1/' "$tmp/out")
check "localhost: health" grep -q '"status":"ok"' <<<"$(curl_ "http://127.0.0.1:$port/health")"
kill -TERM $pid
wait $pid
check "localhost: SIGTERM exits 0" test $? -eq 0
pid=

# Sizes the host cannot hold are refused before anything is allocated (Linux would overcommit).
"$ordo" node --config configs/default.toml --port 0 --set cache.num_blocks=40000000 >"$tmp/out" 2>"$tmp/err"
check "an arena beyond memory exits non-zero" test $? -ne 0
check "an arena beyond memory names the key and the bytes" grep -qE "cache.num_blocks = 40000000 .*needs .* \([0-9]+ bytes\) but only" "$tmp/err"
"$ordo" node --config configs/offload.toml --port 0 --set store.capacity_mb=90000000 >"$tmp/out" 2>"$tmp/err"
check "a host tier beyond memory names store.capacity_mb" grep -q "store.capacity_mb = 90000000 needs 85.8 TiB" "$tmp/err"

finish
