#!/usr/bin/env bash
# TLS between hosts (issue 36 item 4, docs/security.md), with real processes on two loopback
# "hosts" (127.0.0.1 and 127.0.0.2), each with its own copy of the secret and its own certificate
# from `ordo certs`:
# - `ordo certs` makes a CA and certificates (keys 0600) and never writes over one;
# - an actor port beyond loopback without TLS is refused at startup, naming the fix; TLS on without
#   a certificate, or with a certificate of another CA, is refused naming what is missing;
# - one `ordo store` on A, a node on B using it over tcp; P/D with the prefill node on A and the
#   decode node on B pulling over tcp: every digest equals a plain node's, and the bytes came from
#   the store and the peer;
# - the same decode node without TLS, or with another CA's certificate, is refused at the
#   connection (naming TLS or the certificate) and recomputes exactly.
# Every wait is bounded; every process is stopped by its pid.
set -u
ordo=${1:?usage: cli_tls.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids

pki="$tmp/pki"
"$ordo" certs --dir "$pki" store prefill decode client >"$tmp/certs.out" 2>"$tmp/certs.err"
check "ordo certs makes the CA and four certificates" test $? -eq 0 -a -s "$pki/ca.crt" -a -s "$pki/decode.crt"
check "... its keys are 0600" test "$(stat -c %a "$pki/ca.key") $(stat -c %a "$pki/store.key")" = "600 600"
check "... and it prints the config lines" grep -q "security.certificate = \"$pki/store.crt\"" "$tmp/certs.out"
"$ordo" certs --dir "$pki" store >/dev/null 2>"$tmp/again.err"
check "a second certificate of the same name is refused (exit 2), naming the file" \
  test $? -eq 2 -a -n "$(grep "$pki/store.key" "$tmp/again.err")"
"$ordo" certs --dir "$tmp/other" stranger >/dev/null 2>&1
check "another CA's certificate for the refusal cases" test -s "$tmp/other/stranger.crt"

# Each "host" has its own copy of the deployment's secret (0600 in a 0700 directory).
mkdir -m 700 "$tmp/a" "$tmp/b" "$tmp/plain"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tmp/a/secret"
echo >>"$tmp/a/secret"
chmod 600 "$tmp/a/secret"
cp -p "$tmp/a/secret" "$tmp/b/secret"
cp -p "$tmp/a/secret" "$tmp/plain/secret"
tls() { # tls HOST NAME [DIR]: the --set flags of a process on HOST with certificate NAME
  echo --set security.secret_file="$tmp/$1/secret" --set security.tls=on \
    --set security.certificate="${3:-$pki}/$2.crt" --set security.key="${3:-$pki}/$2.key" \
    --set security.cafile="$pki/ca.crt"
}

# Refusals at startup.
"$ordo" store --port 0 --set store.host=0.0.0.0 --set security.secret_file="$tmp/a/secret" \
  >"$tmp/open.out" 2>"$tmp/open.err"
check "a store binding 0.0.0.0 without TLS exits 2" test $? -eq 2
check "... saying to make certificates and turn TLS on" grep -q 'ordo certs.*security.tls = "on"' "$tmp/open.err"
pd=(node --config configs/offload.toml --port 0 --set kv_transfer.connector=pd --set pd.transport=tcp)
"$ordo" "${pd[@]}" --set server.host=0.0.0.0 --set security.secret_file="$tmp/a/secret" \
  >"$tmp/open2.out" 2>"$tmp/open2.err"
check "a P/D node binding 0.0.0.0 without TLS exits 2" test $? -eq 2
check "... naming server.host" grep -q 'server.host = "0.0.0.0"' "$tmp/open2.err"
"$ordo" store --port 0 --set security.secret_file="$tmp/a/secret" --set security.tls=on \
  --set security.cafile="$pki/ca.crt" >"$tmp/nocert.out" 2>"$tmp/nocert.err"
check "TLS on without a certificate exits 2, naming security.certificate" \
  test $? -eq 2 -a -n "$(grep 'security.certificate is not set' "$tmp/nocert.err")"
"$ordo" store --port 0 $(tls a stranger "$tmp/other") >"$tmp/foreign.out" 2>"$tmp/foreign.err"
check "a certificate of another CA exits 2, naming it" \
  test $? -eq 2 -a -n "$(grep 'does not verify against the deployment' "$tmp/foreign.err")"

# Host A: the store and the prefill node (TLS); host B: a store node and the decode node (TLS).
start store store --port 0 $(tls a store)
store_port=$(actor_port_of "$tmp/store.out")
check "the store listens" test -n "$store_port"
start p "${pd[@]}" --set kv_transfer.kv_role=kv_producer $(tls a prefill)
p_port=$(actor_port_of "$tmp/p.out")
onb=(--set server.host=127.0.0.2)
start s node --config configs/offload.toml --port 0 "${onb[@]}" --set kv_transfer.connector=store \
  --set store.address="127.0.0.1:$store_port" --set store.transport=tcp $(tls b client)
start d "${pd[@]}" "${onb[@]}" --set kv_transfer.kv_role=kv_consumer $(tls b decode)
start plain_d "${pd[@]}" "${onb[@]}" --set kv_transfer.kv_role=kv_consumer \
  --set security.secret_file="$tmp/plain/secret"
start foreign_d "${pd[@]}" "${onb[@]}" --set kv_transfer.kv_role=kv_consumer $(tls b stranger "$tmp/other" | sed "s|$pki/ca.crt|$tmp/other/ca.crt|")
start c node --config configs/offload.toml --port 0

cat >"$tmp/client.py" <<'EOF'
# client.py URL TOKENS SEED [PARAMS_JSON]: POSTs a seeded token prompt; prints
# "STATUS DIGEST PEER STORE KV_TRANSFER_PARAMS_JSON".
import json, random, sys, urllib.request, urllib.error
url, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
body = {"prompt": [r.randrange(256) for _ in range(n)], "max_tokens": 4, "temperature": 0}
if len(sys.argv) > 4:
    body["kv_transfer_params"] = json.loads(sys.argv[4])
req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode())
try:
    with urllib.request.urlopen(req, timeout=60) as resp:
        status, text = resp.status, resp.read().decode()
except urllib.error.HTTPError as e:
    status, text = e.code, e.read().decode()
j = json.loads(text)
o = j.get("ordo", {})
f = o.get("from", {})
print(status, o.get("logits_digest", "-"), f.get("peer", "-"), f.get("store", "-"),
      json.dumps(j.get("kv_transfer_params")) if "kv_transfer_params" in j else j.get("error", {}).get("message", ""))
EOF
ask() { python3 "$tmp/client.py" "http://$1" "${@:2}"; }
field() { echo "$1" | cut -d' ' -f"$2"; }
C=$(http_of "$tmp/c.out"); P=$(http_of "$tmp/p.out"); S=$(http_of "$tmp/s.out"); D=$(http_of "$tmp/d.out")
PD=$(http_of "$tmp/plain_d.out"); FD=$(http_of "$tmp/foreign_d.out")
check "host B's nodes listen on 127.0.0.2" test "${D%%:*} ${S%%:*}" = "127.0.0.2 127.0.0.2"

for seed in 1 2; do
  clean=$(field "$(ask "$C" 640 $seed)" 2)
  # The prefill node computes the prompt and signs where its KV is; the decode node pulls it.
  signed=$(ask "$P" 640 $seed '{"do_remote_decode": true}' | cut -d' ' -f5-)
  check "seed $seed: the prefill node answered signed parameters" grep -q signature <<<"$signed"
  got=$(ask "$D" 640 $seed "$signed")
  check "seed $seed: P/D across hosts over TLS is exact" test "$(field "$got" 1) $(field "$got" 2)" = "200 $clean"
  check "... with blocks from the peer" test "$(field "$got" 3)" -gt 0
  ask "$S" 640 $seed >/dev/null
  curl --noproxy '*' -s --max-time 10 "http://$S/admin/evict" -d '{"tier":"hbm"}' >/dev/null
  got=$(ask "$S" 640 $seed)
  check "seed $seed: restored from the store over TLS, exact" test "$(field "$got" 1) $(field "$got" 2)" = "200 $clean"
  check "... with blocks from the store" test "$(field "$got" 4)" -gt 0
  got=$(ask "$PD" 640 $seed "$signed")
  check "seed $seed: a decode node without TLS recomputes exactly, pulling nothing" \
    test "$(field "$got" 1) $(field "$got" 2) $(field "$got" 3)" = "200 $clean 0"
  got=$(ask "$FD" 640 $seed "$signed")
  check "seed $seed: a decode node with another CA's certificate recomputes exactly, pulling nothing" \
    test "$(field "$got" 1) $(field "$got" 2) $(field "$got" 3)" = "200 $clean 0"
done
# Strangers at the TLS store's port: idle sockets, random bytes, a handshake record that never
# finishes. The acceptor's caps and 2 s deadline hold under TLS as in the clear.
cat >"$tmp/attack.py" <<'EOF'
import random, socket, sys, time
port, r = int(sys.argv[1]), random.Random(36)
socks = []
for i in range(300):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
    except OSError:
        continue
    if i % 3 == 1:
        s.sendall(bytes(r.randrange(256) for _ in range(r.randrange(1, 600))))
    elif i % 3 == 2:
        s.sendall(b"\x16\x03\x01\x40\x00" + bytes(40))  # a handshake record claiming 16 KiB
    socks.append(s)
time.sleep(3)
closed = 0
for s in socks:
    s.settimeout(2)
    try:
        while s.recv(4096):
            pass
        closed += 1
    except socket.timeout:
        pass  # still open
    except OSError:
        closed += 1  # reset
print(len(socks), closed)
EOF
got=$(timeout 60 python3 "$tmp/attack.py" "$store_port")
check "300 strangers at the TLS port were all closed within the deadline" test "$got" = "300 300"
S_HTTP=$(http_of "$tmp/store.out")
check "the store counted them" grep -Eq '^ordo_auth_connections_total\{outcome="(deadline|busy)"\} [1-9]' \
  <(curl --noproxy '*' -s --max-time 10 "http://$S_HTTP/metrics")
ask "$S" 640 3 >/dev/null
curl --noproxy '*' -s --max-time 10 "http://$S/admin/evict" -d '{"tier":"hbm"}' >/dev/null
got=$(ask "$S" 640 3)
check "the store still serves its node over TLS, exactly" \
  test "$(field "$got" 1) $(field "$got" 2)" = "200 $(field "$(ask "$C" 640 3)" 2)"
check "... from the store" test "$(field "$got" 4)" -gt 0

check "the node without TLS was told the peer requires TLS" grep -q "the peer requires TLS" "$tmp/plain_d.err"
check "the node with another CA's certificate was told why" \
  grep -Eq "certificate does not verify against security.cafile|TLS: .*(certificate|alert)" "$tmp/foreign_d.err"
check "the prefill node counted the refused connections" \
  grep -Eq '^ordo_auth_connections_total\{outcome="(bad_mac|deadline)"\} [1-9]' \
  <(curl --noproxy '*' -s --max-time 10 "http://$P/metrics")

stop_all d plain_d foreign_d s p store c
finish
