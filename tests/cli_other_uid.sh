#!/usr/bin/env bash
# Another user of the host reads, writes and evicts nothing (issue 36, docs/security.md). A store
# and a node run as this user; the same node binary run as `nobody` (setpriv), with a secret of
# its own or none it can read, is refused by the store's acceptor over tcp and over shm, and a
# P/D prefill node refuses it the same way. In the same run this user's node, started the same
# way, connects — so a refusal for an unrelated reason cannot pass. Needs root (to become
# nobody): otherwise it exits 77, which CTest reports as skipped.
set -u
ordo=${1:?usage: cli_other_uid.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
  echo "SKIP: needs root and setpriv to run a process as nobody"
  exit 77
fi
use_tmp_and_pids
chmod 755 "$tmp"
cp "$ordo" "$tmp/ordo"
ordo=$tmp/ordo # the copy: nobody can run it
cp configs/offload.toml configs/store.toml "$tmp/"
chmod 755 "$tmp/ordo"
chmod 644 "$tmp"/*.toml
mkdir -m 700 "$tmp/nobody" && chown nobody "$tmp/nobody"
as_nobody() { # NAME ARGS...: runs `ordo ARGS...` as nobody, bounded; sets `code`
  local name=$1; shift
  (cd "$tmp" && timeout 30 setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/nonexistent \
     XDG_RUNTIME_DIR= "$tmp/ordo" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err")
  code=$?
}
start s store --config "$tmp/store.toml" --port 0
S=$(actor_port_of "$tmp/s.out")
start p node --config "$tmp/offload.toml" --port 0 --set kv_transfer.connector=pd --set kv_transfer.kv_role=kv_producer
P=$(actor_port_of "$tmp/p.out")
node=(node --config "$tmp/offload.toml" --port 0 --set kv_transfer.connector=store --set store.address=127.0.0.1:$S)

for transport in tcp shm; do
  as_nobody "nobody_$transport" "${node[@]}" --set store.transport=$transport \
    --set security.secret_file="$tmp/nobody/secret"
  check "nobody ($transport, its own secret): the node stops before serving" test "$code" -ne 0 -a "$code" -ne 124
  check "... naming the store's refusal" grep -q "did not prove it holds this deployment's secret" "$tmp/nobody_$transport.err"
  check "... and it never served" test -z "$(http_of "$tmp/nobody_$transport.out")"
  start "owner_$transport" "${node[@]}" --set store.transport=$transport
  check "this user's node ($transport) connects to the same store" \
    grep -q "connected to store" "$tmp/owner_$transport.err"
done
as_nobody nobody_default "${node[@]}" --set store.transport=tcp
check "nobody with the default secret path: refused, naming the secret file" \
  grep -q "security.secret_file" "$tmp/nobody_default.err"
check "... before serving" test "$code" -ne 0 -a "$code" -ne 124
check "the store saw no session of nobody (only this user's two)" \
  grep -q '"sessions":2' <(curl --noproxy '*' -s --max-time 10 "http://$(http_of "$tmp/s.out")/health")
check "... not even one that ended: nobody never got past the acceptor" \
  grep -q '^ordo_store_sessions_ended_total 0$' <(curl --noproxy '*' -s --max-time 10 "http://$(http_of "$tmp/s.out")/metrics")

# A raw connection as nobody to the prefill node's actor port: the preamble takes 64 bytes and
# closes; the prefill node keeps serving.
cat >"$tmp/poke.py" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.settimeout(5)
challenge = s.recv(64)
s.sendall(bytes(15) + b"\x01" + bytes(48))
print(len(challenge), s.recv(64) == b"")
EOF
chmod 644 "$tmp/poke.py"
got=$(cd "$tmp" && timeout 20 setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$tmp/poke.py" "$P")
check "nobody's forged bytes to a P/D node's actor port: challenged, then closed ($got)" test "$got" = "32 True"
check "the prefill node still serves" kill -0 "$p_pid"

stop_all owner_shm owner_tcp p s
finish
