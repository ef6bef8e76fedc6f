#!/usr/bin/env bash
# P/D traced on both nodes (docs/pd.md, docs/traces.md): a prefill and a decode node of the hybrid
# preset behind `ordo proxy`, each recording its own trace; the decode answers pull from the peer,
# both traces pass `ordo trace check`, and the timeline merges them. Every wait is bounded; every
# process is stopped by its pid.
set -u
ordo=${1:?usage: cli_pd_trace.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids
endpoint_of() { sed -n 's|^listening on http://\([^ ]*\).*|\1|p' "$1"; }

start() { # NAME ARGS...: starts `ordo ARGS...`, output in $tmp/NAME.{out,err}
  local name=$1; shift
  "$ordo" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  eval "${name}_pid=$!"
  wait_ready "$tmp/$name.out" 30
}
node_args=(node --config configs/offload.toml --port 0 --set kv_transfer.connector=pd)
start p "${node_args[@]}" --set kv_transfer.kv_role=kv_producer --set trace.path="$tmp/p.trace" --set trace.node=p
start d "${node_args[@]}" --set kv_transfer.kv_role=kv_consumer --set trace.path="$tmp/d.trace" --set trace.node=d
check "a P/D node prints its actor endpoint after the HTTP one" grep -Eq '^listening on http://[^ ]+ tcp://127.0.0.1:[0-9]+$' "$tmp/p.out"
start x proxy --config configs/proxy.toml --set proxy.prefill="$(endpoint_of "$tmp/p.out")" \
  --set proxy.decode="$(endpoint_of "$tmp/d.out")"
x=$(endpoint_of "$tmp/x.out")
for n in 768 2000; do
  python3 -c 'import json, random, sys; r = random.Random(9); print(json.dumps({"prompt": [r.randrange(256) for _ in range(int(sys.argv[1]))], "max_tokens": 4, "temperature": 0}))' $n >"$tmp/body"
  curl --noproxy '*' -s --max-time 60 "http://$x/v1/completions" -d @"$tmp/body" >"$tmp/answer$n"
  check "$n tokens: the decode node pulled from the prefill node" grep -Eq '"peer":[1-9]' "$tmp/answer$n"
done
for name in x d p; do
  eval "pid=\$${name}_pid"
  kill -TERM "$pid"
  wait_exit "$pid" 20
  check "$name stops on SIGTERM" test "$code" -eq 0
done
"$ordo" trace check "$tmp/p.trace" >"$tmp/check_p" 2>&1
check "the prefill node's trace checks clean" test $? -eq 0
"$ordo" trace check "$tmp/d.trace" >"$tmp/check_d" 2>&1
check "the decode node's trace checks clean" test $? -eq 0
check "... without unmatched messages" test -z "$(grep warning "$tmp/check_d" "$tmp/check_p")"
"$ordo" trace timeline "$tmp/p.trace" "$tmp/d.trace" -o "$tmp/x.json" >"$tmp/timeline" 2>&1
check "the timeline merges both nodes" grep -q "nodes: p, d" "$tmp/timeline"
finish
