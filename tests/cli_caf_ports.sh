#!/usr/bin/env bash
# No unauthenticated byte reaches CAF's BASP (issue 36, docs/security.md): a seeded fuzzer lies to
# `ordo store`'s actor port and to a P/D prefill node's server.actor_port — forged BASP handshake
# headers, a 4 GiB length claim, random bytes, idle and half-open sockets — while a node uses the
# store and a decode node pulls from the prefill node. Afterwards both still serve (a store hit and
# a P/D pull, each exact), neither grew by 64 MiB, and the idle sockets were closed.
# Every wait is bounded; every process is stopped by its pid.
set -u
ordo=${1:?usage: cli_caf_ports.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

start s store --config configs/store.toml --port 0
start n node --config configs/offload.toml --port 0 --set kv_transfer.connector=store \
  --set store.address="127.0.0.1:$(actor_port_of "$tmp/s.out")"
pd=(node --config configs/offload.toml --port 0 --set kv_transfer.connector=pd)
start p "${pd[@]}" --set kv_transfer.kv_role=kv_producer
start d "${pd[@]}" --set kv_transfer.kv_role=kv_consumer
start c node --config configs/offload.toml --port 0
S=$(actor_port_of "$tmp/s.out"); P=$(actor_port_of "$tmp/p.out")

cat >"$tmp/client.py" <<'EOF'
# client.py URL TOKENS SEED [PARAMS_JSON]: prints "STATUS DIGEST STORE PEER PARAMS"
import json, random, sys, urllib.request
url, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
body = {"prompt": [r.randrange(256) for _ in range(n)], "max_tokens": 4, "temperature": 0}
if len(sys.argv) > 4:
    body["kv_transfer_params"] = json.loads(sys.argv[4])
try:
    with urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode()),
                                timeout=60) as resp:
        status, j = resp.status, json.loads(resp.read())
except Exception as e:
    print("000 - - - -"); sys.exit(0)
o = j.get("ordo", {})
print(status, o.get("logits_digest"), o["from"]["store"], o["from"]["peer"],
      json.dumps(j["kv_transfer_params"]) if "kv_transfer_params" in j else "-")
EOF
ask() { python3 "$tmp/client.py" "http://$1" "${@:2}"; }
field() { echo "$1" | cut -d' ' -f"$2"; }

cat >"$tmp/fuzz.py" <<'EOF'
# fuzz.py PORT SEED IDLE: lies to a CAF port; prints how many idle sockets the server closed.
import random, socket, sys, time
port, seed, idle_n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
def send(data, hold=0.05, half=False):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(data)
        if half: s.shutdown(socket.SHUT_WR)
        time.sleep(hold); s.close()
    except OSError: pass
forged = [bytes(15) + b"\x01" + bytes(16), b"\x01" + bytes(31)]
claim = b"\x01" + bytes(3) + b"\xff" * 4 + bytes(24)  # a handshake claiming a 4 GiB payload
for f in forged: send(f)
send(claim + b"x" * (1 << 20), hold=0.5)
for op in range(8):  # every BASP operation byte, with random lengths
    send(bytes([op]) + bytes(3) + rng.randbytes(4) + rng.randbytes(24 + rng.randrange(100)))
for _ in range(40):
    send(rng.randbytes(rng.randrange(1, 4096)), half=rng.random() < 0.3)
idle = []
for _ in range(idle_n):
    try: idle.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except OSError: break
time.sleep(3)
closed = 0
for s in idle:
    s.setblocking(False)
    try:
        while s.recv(64):  # the challenge of a connection the acceptor took, then its end
            pass
        closed += 1
    except BlockingIOError: pass
    except OSError: closed += 1
    s.close()
print(closed, len(idle))
EOF

# Before: the store serves a hit, the decode node pulls.
clean=$(field "$(ask "$(http_of "$tmp/c.out")" 768 1)" 2)
ask "$(http_of "$tmp/n.out")" 768 1 >/dev/null
curl --noproxy '*' -s --max-time 10 "http://$(http_of "$tmp/n.out")/admin/evict" -d '{"tier":"hbm"}' >/dev/null
s_rss=$(rss_kib "$s_pid"); p_rss=$(rss_kib "$p_pid")
ulimit -n 4096 2>/dev/null
read s_closed s_idle < <(python3 "$tmp/fuzz.py" "$S" 36 1000)
read p_closed p_idle < <(python3 "$tmp/fuzz.py" "$P" 37 1000)
check "the store is alive after the fuzzer" kill -0 "$s_pid"
check "the prefill node is alive after the fuzzer" kill -0 "$p_pid"
check "the store closed its idle sockets ($s_closed of $s_idle)" test "$s_closed" -eq "$s_idle" -a "$s_idle" -gt 100
check "the prefill node closed its idle sockets ($p_closed of $p_idle)" test "$p_closed" -eq "$p_idle" -a "$p_idle" -gt 100
check "the store grew by less than 64 MiB ($s_rss -> $(rss_kib "$s_pid") KiB)" test $(( $(rss_kib "$s_pid") - s_rss )) -lt 65536
check "the prefill node grew by less than 64 MiB ($p_rss -> $(rss_kib "$p_pid") KiB)" test $(( $(rss_kib "$p_pid") - p_rss )) -lt 65536
check "the store counts the refused connections" grep -Eq '^ordo_auth_connections_total\{outcome="deadline"\} [1-9]' \
  <(curl --noproxy '*' -s --max-time 10 "http://$(http_of "$tmp/s.out")/metrics")
check "... and so does the prefill node" grep -Eq '^ordo_auth_connections_total\{outcome="busy"\} [1-9]' \
  <(curl --noproxy '*' -s --max-time 10 "http://$(http_of "$tmp/p.out")/metrics")
got=$(ask "$(http_of "$tmp/n.out")" 768 1)
check "the node's store session survived: a store hit, exact" test "$(field "$got" 2)" = "$clean" -a "$(field "$got" 3)" -gt 0
pre=$(ask "$(http_of "$tmp/p.out")" 768 1 '{"do_remote_decode": true}')
got=$(ask "$(http_of "$tmp/d.out")" 768 1 "$(echo "$pre" | cut -d' ' -f5-)")
check "a decode node still pulls from the prefill node, exact" test "$(field "$got" 2)" = "$clean" -a "$(field "$got" 4)" -gt 0

stop_all d p c n s
finish
