#!/usr/bin/env bash
# The official OpenAI client (npm `openai`, installed by scripts/install-deps.sh) against a real
# `ordo node` guarded by server.api_key: models, completions and chat, whole and streamed.
set -u
ordo=${1:?usage: cli_openai.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
pid=
trap 'test -n "$pid" && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
check "the openai package is installed" test -f tests/openai_client/node_modules/openai/package.json

"$ordo" node --config configs/default.toml --port 0 --set server.api_key=sk-ordo-test >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 1 100); do grep -q listening "$tmp/out" 2>/dev/null && break; sleep 0.1; done
port=$(sed -E 's/.*:([0-9]+)$/\1/' "$tmp/out")
check "node is listening" test -n "$port"
timeout 120 node tests/openai_client/check.mjs "http://127.0.0.1:$port/v1" sk-ordo-test >"$tmp/client" 2>&1
check "the OpenAI client's checks pass" test $? -eq 0
cat "$tmp/client"
kill -TERM $pid
wait $pid
check "node exits 0 after SIGTERM" test $? -eq 0
pid=
finish
