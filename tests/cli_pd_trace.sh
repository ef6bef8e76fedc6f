#!/usr/bin/env bash
# P/D traced on both nodes (docs/pd.md, docs/traces.md): a prefill and a decode node of the hybrid
# preset behind `ordo proxy`, each recording its own trace; the decode answers pull from the peer,
# both traces pass `ordo trace check`, and the timeline merges them with flows between the nodes.
# Every wait is bounded; every process is stopped by its pid.
set -u
ordo=${1:?usage: cli_pd_trace.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids
endpoint_of() { sed -n 's|^listening on http://\([^ ]*\).*|\1|p' "$1"; }

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
# Flows between the nodes (docs/traces.md): each lookup, pin and unpin step the decode node's peer
# client sent is an arrow from d's client to p's store, and its answer one back.
check "the timeline draws flows between the nodes" grep -Eq '^flows between nodes: [1-9][0-9]* \(d pulls from p: ' "$tmp/timeline"
check "... and pairs every exchange it was given" test -z "$(grep 'no flows drawn' "$tmp/timeline")"
cat >"$tmp/flows.py" <<'EOF_PY'
import json, re, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
printed = int(re.search(r"^flows between nodes: (\d+)", open(sys.argv[2]).read(), re.M).group(1))
node = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
lane = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
slices = {(e["pid"], e["tid"], e["ts"]): e for e in events if e["ph"] == "X"}
ends = {}
for e in events:
    if e.get("cat") == "pd":
        ends.setdefault(e["id"], []).append(e)
wrong, steps = [], set()
for fid, pair in ends.items():
    s = [e for e in pair if e["ph"] == "s"]
    f = [e for e in pair if e["ph"] == "f"]
    if len(s) != 1 or len(f) != 1:
        wrong.append("flow %d has %d starts and %d ends" % (fid, len(s), len(f)))
        continue
    s, f = s[0], f[0]
    answer = s["name"].endswith("_done")
    client, store = (f, s) if answer else (s, f)
    if not s["name"].startswith("pull from p: store_"):
        wrong.append("flow %d is named %r" % (fid, s["name"]))
    if node[client["pid"]] != "d" or not lane[client["pid"], client["tid"]].startswith("peer:") or \
            node[store["pid"]] != "p" or lane[store["pid"], store["tid"]] != "store":
        wrong.append("%s goes from %s %s to %s %s" % (s["name"], node[s["pid"]], lane[s["pid"], s["tid"]],
                                                    node[f["pid"]], lane[f["pid"], f["tid"]]))
    if f["ts"] < s["ts"] - 1e-3:
        wrong.append("%s ends %.3f us before it starts" % (s["name"], s["ts"] - f["ts"]))
    if s["name"] == "pull from p: store_step":  # what the prefill node's store took
        got = slices.get((f["pid"], f["tid"], f["ts"]))
        steps.update(w for w in ("pins", "unpins") if got and re.search(r"\b%s \d" % w, got["args"]["summary"]))
    steps.add(s["name"].split(": ")[1])
for want in ("store_contains", "store_contains_done", "store_step", "store_step_done", "pins", "unpins"):
    if want not in steps:
        wrong.append("no flow for " + want)
if len(ends) != printed or not ends:
    wrong.append("%d flows in the file, %d printed" % (len(ends), printed))
print("\n".join(wrong) or "%d flows, every request from d's peer client to p's store and its answer back" % len(ends))
sys.exit(1 if wrong else 0)
EOF_PY
python3 "$tmp/flows.py" "$tmp/x.json" "$tmp/timeline" >"$tmp/flows" 2>&1
flows_ok=$?
check "every flow between the nodes goes from d's peer client to p's store (its answer back): $(cat "$tmp/flows")" \
  test "$flows_ok" -eq 0
finish
