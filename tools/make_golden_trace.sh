#!/usr/bin/env bash
# Records tests/data/golden.trace: a small offload run of the hybrid preset (two requests, HBM
# evicted, the second sent again from the host tier), decoded by tests/test_trace_golden.cpp.
# Re-record it only when the trace schema gains fields (messages/trace/trace.capnp and messages/ordo.capnp are append-only: an
# old golden file must keep decoding, which is what the test guards).
set -euo pipefail
ordo=${1:?usage: make_golden_trace.sh PATH_TO_ORDO [OUT]}
out=${2:-tests/data/golden.trace}
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
"$ordo" node --config configs/offload.toml --port 0 --set cache.block_size=16 --set cache.chunk_size=32 \
  --set cache.checkpoint_interval=32 --set device.chaos_seed=11 --set trace.node=golden --trace "$tmp/g.trace" \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$tmp/out" && break; sleep 0.1; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$tmp/out")
prompt=$(python3 -c 'print(list(range(1, 70)))')
post() { curl -sf -m 60 "http://127.0.0.1:$port$1" -H 'content-type: application/json' -d "$2" >/dev/null; }
post /v1/completions "{\"prompt\": $prompt, \"max_tokens\": 4}"
post /v1/completions "{\"prompt\": [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21], \"max_tokens\": 3, \"stream\": true}"
post /admin/evict '{"tier": "hbm"}'
post /v1/completions "{\"prompt\": $prompt, \"max_tokens\": 4}"
kill -TERM $pid
wait $pid || true
mkdir -p "$(dirname "$out")"
cp "$tmp/g.trace" "$out"
echo "wrote $out ($(stat -c %s "$out") bytes)"
