#!/usr/bin/env bash
# `ordo store` as a user runs it: config errors, the ready line, /health, /metrics, a taken port,
# SIGTERM. Every wait is bounded; every process started here is stopped by its pid.
set -u
ordo=${1:?usage: cli_store.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
pid=
pid2=
cleanup() {
  for p in $pid $pid2; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
curl_() { curl --noproxy '*' -s --max-time 10 "$@"; }

# Bad config: exit 2, naming the key, nothing on stdout.
timeout 20 "$ordo" store --port 0 --set store.capcity_mb=64 >"$tmp/out" 2>"$tmp/err"
check "an unknown key exits 2" test $? -eq 2
check "an unknown key is named with the allowed ones" \
  grep -q "unknown key store.capcity_mb = 64; allowed keys in \[store\]: capacity_mb, host, port, http_port, granularity, engine_id" "$tmp/err"
check "a bad config prints nothing on stdout" test ! -s "$tmp/out"
timeout 20 "$ordo" store --port 0 --set store.granularity=page >"$tmp/out" 2>"$tmp/err"
check "a bad granularity exits 2" test $? -eq 2
check "a bad granularity names key and rule" grep -q 'store.granularity = "page": must be one of block, chunk' "$tmp/err"
timeout 20 "$ordo" store --config configs/no_such_store.toml >"$tmp/out" 2>"$tmp/err"
check "a missing config file exits 2" test $? -eq 2
check "a missing config file is named" grep -q 'config file "configs/no_such_store.toml": no such file' "$tmp/err"
timeout 20 "$ordo" store --port 65536 >"$tmp/out" 2>"$tmp/err"
check "--port 65536 exits 2" test $? -eq 2
check "--port 65536 names the flag and the range" grep -q -- "--port 65536: must be between 0 and 65535" "$tmp/err"

# A store on free ports prints exactly one ready line: HTTP first, then the actor port.
"$ordo" store --port 0 --set store.http_port=0 --set store.capacity_mb=64 >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_ready "$tmp/out"
check "ready line is exact" grep -qE '^listening on http://127\.0\.0\.1:[0-9]+ tcp://127\.0\.0\.1:[0-9]+$' "$tmp/out"
check "stdout holds only the ready line" test "$(wc -l <"$tmp/out")" -eq 1
http_port=$(sed -E 's|^listening on http://[^:]+:([0-9]+) .*|\1|' "$tmp/out")
tcp_port=$(sed -E 's|.* tcp://[^:]+:([0-9]+)$|\1|' "$tmp/out")
url=http://127.0.0.1:$http_port
check "the two ports differ" test "$http_port" != "$tcp_port"

health=$(curl_ "$url/health")
engine_id=$(sed -E 's/.*"engine_id":"([^"]*)".*/\1/' <<<"$health")
check "health says ok" grep -q '"status":"ok"' <<<"$health"
check "health carries a derived engine id" grep -qE '^store-[0-9a-f]{16}$' <<<"$engine_id"
check "the engine id is logged" grep -q "engine id $engine_id" "$tmp/err"
check "health carries sessions, objects, bytes used" \
  bash -c 'grep -q "\"sessions\":0" <<<"$1" && grep -q "\"objects\":0" <<<"$1" && grep -q "\"bytes_used\":0" <<<"$1"' _ "$health"
check "health shows the capacity asked for" grep -q '"capacity_bytes":67108864' <<<"$health"
check "health shows the granularity" grep -q '"granularity":"block"' <<<"$health"
check "an unknown path is 404" test "$(curl_ -o /dev/null -w '%{http_code}' "$url/nope")" = 404

curl_ "$url/metrics" >"$tmp/metrics"
check "metrics carry the store capacity" grep -q '^ordo_store_capacity_bytes 67108864$' "$tmp/metrics"
check "metrics carry sessions and refused hellos" \
  bash -c 'grep -q "^ordo_store_sessions 0$" "$1" && grep -q "^ordo_store_hellos_refused_total 0$" "$1"' _ "$tmp/metrics"
check "promtool finds no problem in /metrics" bash -c 'test -z "$(promtool check metrics <"$1" 2>&1)"' _ "$tmp/metrics"

# A second store on the first one's actor port: exit 1, naming the port.
timeout 20 "$ordo" store --port "$tcp_port" >"$tmp/out2" 2>"$tmp/err2" &
pid2=$!
wait_exit $pid2 15
pid2=
check "a taken --port exits 1" test "$code" -eq 1
check "a taken --port is named" grep -q "cannot listen on tcp://127.0.0.1:$tcp_port" "$tmp/err2"
check "a store that could not listen prints nothing on stdout" test ! -s "$tmp/out2"
# A taken HTTP port too.
timeout 20 "$ordo" store --port 0 --set store.http_port="$http_port" >"$tmp/out2" 2>"$tmp/err2"
check "a taken store.http_port exits 1" test $? -eq 1
check "a taken store.http_port is named" grep -q "cannot listen on http://127.0.0.1:$http_port" "$tmp/err2"

# SIGHUP is logged and ignored; SIGTERM stops it with 0 within 5 s.
kill -HUP $pid
sleep 0.2
check "SIGHUP leaves it serving" grep -q '"status":"ok"' <<<"$(curl_ "$url/health")"
kill -TERM $pid
wait_exit $pid 5
check "SIGTERM exits 0 within 5 s" test "$code" -eq 0
pid=
check "the stop is logged" grep -q "ordo store: SIGTERM: stopping" "$tmp/err"

# A configured engine id is used as given.
"$ordo" store --port 0 --set store.engine_id=store-main --set store.capacity_mb=1 >"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_ready "$tmp/out"
url=http://127.0.0.1:$(sed -E 's|^listening on http://[^:]+:([0-9]+) .*|\1|' "$tmp/out")
check "a configured engine id is shown" grep -q '"engine_id":"store-main"' <<<"$(curl_ "$url/health")"
kill -INT $pid
wait_exit $pid 5
check "SIGINT exits 0 within 5 s" test "$code" -eq 0
pid=

finish
