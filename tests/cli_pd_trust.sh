#!/usr/bin/env bash
# A client chooses no peer (issue 35, docs/security.md). Attacks replayed against real nodes:
# - a lying prefill node (a stranger's secret; faults.drop_edge + chaos make its KV wrong) named by
#   a client, with the parameters it signed and with unsigned ones: 400, and innocent clients'
#   digests (the prompt, an extension of it, after an HBM eviction) equal a clean node's;
# - the same through `ordo proxy`: the client's parameters are dropped, the answer is exact;
# - a peer listed in pd.peers whose secret is wrong: refused at its hello, the request recomputes;
#   a listed peer holding the secret: pulled from without a signature;
# - a listener that answers junk, named by a client: 400, and it sees no connection.
# Every wait is bounded; every process is stopped by its pid.
set -u
ordo=${1:?usage: cli_pd_trust.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids
mkdir -m 700 "$tmp/stranger"
pd=(node --config configs/offload.toml --port 0 --set kv_transfer.connector=pd)
start c node --config configs/offload.toml --port 0
start p "${pd[@]}" --set kv_transfer.kv_role=kv_producer
start liar "${pd[@]}" --set kv_transfer.kv_role=kv_producer --set faults.drop_edge=upload_compute \
  --set device.chaos_seed=3 --set security.secret_file="$tmp/stranger/secret"
start d "${pd[@]}" --set kv_transfer.kv_role=kv_both
start x proxy --config configs/proxy.toml --set proxy.prefill="$(http_of "$tmp/p.out")" \
  --set proxy.decode="$(http_of "$tmp/d.out")"
liar_port=$(actor_port_of "$tmp/liar.out")
p_port=$(actor_port_of "$tmp/p.out")
start d2 "${pd[@]}" --set kv_transfer.kv_role=kv_consumer --set pd.peers="127.0.0.1:$liar_port,127.0.0.1:$p_port"
check "the stranger made its own secret, 0600" test "$(stat -c %a "$tmp/stranger/secret" 2>/dev/null)" = 600

# A listener that answers every connection with 32 bytes of junk, and counts connections.
cat >"$tmp/junk.py" <<'EOF'
import socket, sys, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print("listening on tcp://127.0.0.1:%d" % s.getsockname()[1], flush=True)
n = 0
while True:
    c, _ = s.accept(); n += 1
    open(sys.argv[1], "w").write(str(n))
    try: c.sendall(bytes(8) + b"J" * 24)
    except OSError: pass
EOF
python3 "$tmp/junk.py" "$tmp/junk.count" >"$tmp/junk.out" 2>"$tmp/junk.err" &
pids+=($!)
wait_ready "$tmp/junk.out"
junk_port=$(sed -n 's|^listening on tcp://127.0.0.1:\([0-9]*\)$|\1|p' "$tmp/junk.out")

cat >"$tmp/client.py" <<'EOF'
# client.py URL TOKENS SEED [PARAMS_JSON|-] [EXTRA]: POSTs a seeded token prompt; prints
# "STATUS DIGEST PEER" and the body to $3.body.
import json, random, sys, urllib.request, urllib.error
url, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
prompt = [r.randrange(256) for _ in range(n)]
if len(sys.argv) > 5:
    prompt += [r.randrange(256) for _ in range(int(sys.argv[5]))]
body = {"prompt": prompt, "max_tokens": 4, "temperature": 0}
if len(sys.argv) > 4 and sys.argv[4] != "-":
    body["kv_transfer_params"] = json.loads(sys.argv[4])
req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode())
try:
    with urllib.request.urlopen(req, timeout=60) as resp:
        status, text = resp.status, resp.read().decode()
except urllib.error.HTTPError as e:
    status, text = e.code, e.read().decode()
open(sys.argv[6] if len(sys.argv) > 6 else "/dev/null", "w").write(text)
j = json.loads(text)
o = j.get("ordo", {})
print(status, o.get("logits_digest", "-"), o.get("from", {}).get("peer", "-"),
      json.dumps(j.get("kv_transfer_params")) if "kv_transfer_params" in j else j.get("error", {}).get("message", ""))
EOF
ask() { python3 "$tmp/client.py" "http://$1" "${@:2}"; }
field() { echo "$1" | cut -d' ' -f"$2"; }
C=$(http_of "$tmp/c.out"); D=$(http_of "$tmp/d.out"); D2=$(http_of "$tmp/d2.out")
L=$(http_of "$tmp/liar.out"); P=$(http_of "$tmp/p.out"); X=$(http_of "$tmp/x.out")

for seed in 1 2 3; do
  clean=$(field "$(ask "$C" 768 $seed)" 2)
  clean_ext=$(field "$(ask "$C" 768 $seed - 100)" 2)
  # The liar prefills the prompt and signs its answer with its own (stranger's) secret.
  pre=$(ask "$L" 768 $seed '{"do_remote_decode": true}')
  signed=$(echo "$pre" | cut -d' ' -f4-)
  check "seed $seed: the liar answered signed parameters" grep -q signature <<<"$signed"
  got=$(ask "$D" 768 $seed "$signed")
  check "seed $seed: the liar's own signature is refused with 400" test "$(field "$got" 1)" = 400
  check "... naming the rule" grep -q "signature does not verify" <<<"$got"
  got=$(ask "$D" 768 $seed "{\"remote_host\": \"127.0.0.1\", \"remote_port\": $liar_port, \"transfer_id\": \"1\"}")
  check "seed $seed: unsigned parameters naming the liar get 400" test "$(field "$got" 1)" = 400
  check "... naming pd.peers" grep -q "not in pd.peers" <<<"$got"
  got=$(ask "$X" 768 $seed "$signed")
  check "seed $seed: through the proxy, the client's parameters are dropped and the answer is exact" \
    test "$(field "$got" 1) $(field "$got" 2)" = "200 $clean"
  check "... pulled from the honest prefill node" test "$(field "$got" 3)" -gt 0
  got=$(ask "$D" 768 $seed)
  check "seed $seed: an innocent client gets the clean digest" test "$(field "$got" 2)" = "$clean"
  got=$(ask "$D" 768 $seed - 100)
  check "seed $seed: and so does an extension of the prompt" test "$(field "$got" 2)" = "$clean_ext"
done
curl --noproxy '*' -s --max-time 10 "http://$D/admin/evict" -d '{"tier":"hbm"}' >/dev/null
got=$(ask "$D" 768 1)
check "after an HBM eviction the host tier serves the clean digest" test "$(field "$got" 2)" = "$(field "$(ask "$C" 768 1)" 2)"

# Listed peers: the liar is listed but does not hold the secret; p is listed and does.
clean=$(field "$(ask "$C" 700 7)" 2)
ask "$L" 700 7 '{"do_remote_decode": true}' >/dev/null
got=$(ask "$D2" 700 7 "{\"remote_host\": \"127.0.0.1\", \"remote_port\": $liar_port, \"transfer_id\": \"1\"}")
check "a listed peer with a wrong secret: served, nothing pulled, exact" \
  test "$(field "$got" 1) $(field "$got" 3) $(field "$got" 2)" = "200 0 $clean"
check "... its hello was refused, naming the secret" grep -q "did not prove it holds this deployment's secret" "$tmp/d2.err"
clean=$(field "$(ask "$C" 700 8)" 2)
ask "$P" 700 8 '{"do_remote_decode": true}' >/dev/null
got=$(ask "$D2" 700 8 "{\"remote_host\": \"127.0.0.1\", \"remote_port\": $p_port}")
check "a listed peer holding the secret is pulled from without a signature, exactly" \
  test "$(field "$got" 1) $(field "$got" 2)" = "200 $clean"
check "... from the peer" test "$(field "$got" 3)" -gt 0

# The junk listener: refused before any connection, with or without a made-up signature.
for params in "{\"remote_host\": \"127.0.0.1\", \"remote_port\": $junk_port}" \
              "{\"remote_host\": \"127.0.0.1\", \"remote_port\": $junk_port, \"remote_engine_id\": \"x\", \"expires_at\": 9999999999, \"signature\": \"$(printf 'ab%.0s' $(seq 32))\"}"; do
  got=$(ask "$D" 300 5 "$params")
  check "a client naming a junk listener gets 400" test "$(field "$got" 1)" = 400
done
sleep 1
check "... and the listener saw no connection" test ! -e "$tmp/junk.count"
check "the decode node still serves" test "$(field "$(ask "$D" 300 5)" 1)" = 200
check "refusals are counted" grep -Eq '^ordo_pd_kv_params_refused_total [1-9]' \
  <(curl --noproxy '*' -s --max-time 10 "http://$D/metrics")

# A listed peer that accepts and hangs up: the first request waits within store.deadline_ms while
# the connect is retried, recomputes, and once no request wants the peer it is tried no more.
cat >"$tmp/closer.py" <<'EOF'
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print("listening on tcp://127.0.0.1:%d" % s.getsockname()[1], flush=True)
n = 0
while True:
    c, _ = s.accept(); n += 1; c.close()
    open(sys.argv[1], "w").write(str(n))
EOF
python3 "$tmp/closer.py" "$tmp/closer.count" >"$tmp/closer.out" 2>"$tmp/closer.err" &
pids+=($!)
wait_ready "$tmp/closer.out"
closer_port=$(sed -n 's|^listening on tcp://127.0.0.1:\([0-9]*\)$|\1|p' "$tmp/closer.out")
start d3 "${pd[@]}" --set kv_transfer.kv_role=kv_consumer --set pd.peers="127.0.0.1:$closer_port" \
  --set store.deadline_ms=1000
D3=$(http_of "$tmp/d3.out")
clean=$(field "$(ask "$C" 300 6)" 2)
got=$(ask "$D3" 300 6 "{\"remote_host\": \"127.0.0.1\", \"remote_port\": $closer_port}")
check "a listed peer that hangs up: the request recomputes, exact" \
  test "$(field "$got" 1) $(field "$got" 3) $(field "$got" 2)" = "200 0 $clean"
tried=$(cat "$tmp/closer.count" 2>/dev/null || echo 0)
check "... after retrying the connect within the deadline ($tried connections)" test "$tried" -ge 2
sleep 3
check "... and no retry once no request wants it" test "$(cat "$tmp/closer.count")" = "$tried"

stop_all x d3 d2 d liar p c
finish
