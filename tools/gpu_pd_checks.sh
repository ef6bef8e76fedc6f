#!/bin/bash
# P/D topologies (configs/topologies/pd_*.toml) and `ordo bench pd` with every node on the GPU device, from the
# repository root on the GPU machine with a bundle made by `make gpu-bundle`: each node's `set`
# gets device.kind=hip; every digest must equal the reference node's (issue 13, docs/pd.md).
set -uo pipefail
failed=0
mkdir -p /tmp/topos
for t in pd_dense pd_qsa_gdn_ple pd_gdn_hybrid pd_leases; do
  python3 - "configs/topologies/$t.toml" "/tmp/topos/$t.toml" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
out, block, has_set = [], None, False
for i, l in enumerate(lines):
    if l.startswith("[["):
        block = l
    if block == "[[node]]" and l.startswith("set = ["):
        l = l.replace("set = [", 'set = ["device.kind=hip", ', 1)
    out.append(l)
    if block == "[[node]]" and l.startswith("config =") and not any(x.startswith("set = [") for x in lines[i+1:i+4]):
        out.append('set = ["device.kind=hip"]')
open(sys.argv[2], "w").write("\n".join(out))
PY
  "$(dirname "$0")/run" topo run /tmp/topos/$t.toml 2>&1 | tail -12 || failed=1
done
# Nodes started at once on one GPU: their first answers must agree and depend on the prompt
# (a zero-fill that raced the weights' upload once gave every prompt the same logits).
python3 - "$(dirname "$0")/run" <<'PY' || failed=1
import json, random, subprocess, sys, urllib.request
run = sys.argv[1]
bodies = [json.dumps({"prompt": [random.Random(s).randrange(256) for _ in range(256)], "max_tokens": 1,
                      "temperature": 0}).encode() for s in (7, 8)]
seen = [set(), set()]
for round in range(4):
    procs = [subprocess.Popen([run, "node", "--config", "configs/dense.toml", "--port", "0", "--set", "device.kind=hip",
                               "--set", "log.level=warn"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(3)]
    try:
        eps = [p.stdout.readline().split("http://")[1].split()[0] for p in procs]
        for ep in eps:
            for i, b in enumerate(bodies):
                r = urllib.request.Request("http://%s/v1/completions" % ep, data=b, headers={"Content-Type": "application/json"})
                seen[i].add(json.load(urllib.request.urlopen(r, timeout=60))["ordo"]["logits_digest"])
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
ok = len(seen[0]) == 1 and len(seen[1]) == 1 and seen[0] != seen[1]
print("first answers of 3 nodes started at once, 4 rounds: %s %s" % (sorted(seen[0]) + sorted(seen[1]), "PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
PY

# TTFT of P/D against a single node and the transfer floor (BENCHMARKS.md), 1b models on the GPU.
for preset in dense qsa_gdn_ple; do
  "$(dirname "$0")/run" bench pd --config configs/dense.toml --set model.preset=$preset --set model.size=1b \
    --set device.kind=hip --set cache.num_blocks=1024 --set cache.checkpoint_interval=-1 --set store.capacity_mb=4096 \
    --prompt-tokens 1024 4096 --repeats 3 2>&1 | tail -8 || failed=1
done
echo "gpu pd checks: $([ $failed -eq 0 ] && echo PASS || echo FAIL)"
exit $failed
