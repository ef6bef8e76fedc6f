#!/usr/bin/env bash
# `ordo proxy` as a user runs it (docs/proxy.md): config errors, the ready line, the P/D flow over
# two plain nodes (same logits digest as one node), streaming, chat, the exact requests the
# upstreams get (fake nodes in Python), prefill down (decode-only), decode down (502), the API
# key, /health, /metrics, 404, a taken port, SIGTERM. Every wait is bounded; every process
# started here is stopped by its pid.
set -u
ordo=${1:?usage: cli_proxy.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids
curl_() { curl --noproxy '*' -s --max-time 30 "$@"; }

# The HTTP port of a ready line in $1.
port_of() { sed -E 's|^listening on http://[^:]+:([0-9]+).*|\1|' "$1"; }

# A port nothing listens on (bound, then closed).
dead_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
digest_of() { grep -o '"logits_digest":"[0-9a-f]*"' | tail -1; }
# Starts `ordo proxy` with these --set's; sets `proxy_pid` and `proxy_url`; output in $tmp/$1.{out,err}.
start_proxy() {
  local name=$1; shift
  "$ordo" proxy --config configs/proxy.toml "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  proxy_pid=$!
  pids+=("$proxy_pid")
  wait_ready "$tmp/$name.out"
  proxy_url=http://127.0.0.1:$(port_of "$tmp/$name.out")
}
stop_pid() { kill -TERM "$1" 2>/dev/null; wait_exit "$1" 10; }

# --- config errors: exit 2 naming the key, nothing on stdout -----------------------------------
timeout 20 "$ordo" proxy --config configs/proxy.toml >"$tmp/out" 2>"$tmp/err"
check "no decode node exits 2" test $? -eq 2
check "no decode node is named" grep -q 'ordo proxy: invalid config: proxy.decode = "": must name at least one decode node' "$tmp/err"
check "a bad config prints nothing on stdout" test ! -s "$tmp/out"
timeout 20 "$ordo" proxy --config configs/proxy.toml --set proxy.decoder=127.0.0.1:1 >"$tmp/out" 2>"$tmp/err"
check "an unknown key exits 2" test $? -eq 2
check "an unknown key is named with the allowed ones" \
  grep -q 'unknown key proxy.decoder = "127.0.0.1:1"; allowed keys in \[proxy\]: host, port, prefill, decode, timeout_s, api_key' "$tmp/err"
timeout 20 "$ordo" proxy --config configs/proxy.toml --set proxy.decode=127.0.0.1:1 --set proxy.timeout_s=0 >"$tmp/out" 2>"$tmp/err"
check "timeout_s = 0 exits 2" test $? -eq 2
check "timeout_s = 0 names key and rule" grep -q 'proxy.timeout_s = 0: must be seconds between 1 and 86400' "$tmp/err"
timeout 20 "$ordo" proxy --config configs/proxy.toml --set proxy.decode=localhost >"$tmp/out" 2>"$tmp/err"
check "an endpoint without a port exits 2" test $? -eq 2
check "an endpoint without a port is named" grep -q 'proxy.decode = "localhost": entry "localhost" has no :PORT' "$tmp/err"
timeout 20 "$ordo" proxy --config configs/proxy.toml --set proxy.decode=127.0.0.1:1 --port 70000 >"$tmp/out" 2>"$tmp/err"
check "--port 70000 exits 2" test $? -eq 2
check "--port 70000 names the key and the range" grep -q 'proxy.port = 70000: must be between 0 and 65535' "$tmp/err"
timeout 20 "$ordo" proxy --config configs/proxy.toml --set proxy.decode=127.0.0.1:1 --set 'proxy.api_key="a secret"' >"$tmp/out" 2>"$tmp/err"
check "a bad api_key exits 2" test $? -eq 2
check "a bad api_key is never shown" bash -c 'grep -q "proxy.api_key (set, not shown)" "$1" && ! grep -q secret "$1"' _ "$tmp/err"
timeout 20 "$ordo" proxy --config configs/no_such_proxy.toml >"$tmp/out" 2>"$tmp/err"
check "a missing config file exits 2" test $? -eq 2
check "a missing config file is named" grep -q 'config file "configs/no_such_proxy.toml": no such file' "$tmp/err"

# --- two plain nodes and a proxy over them ------------------------------------------------------
"$ordo" node --config configs/dense.toml --port 0 >"$tmp/n1.out" 2>"$tmp/n1.err" &
n1=$!
pids+=("$n1")
"$ordo" node --config configs/dense.toml --port 0 >"$tmp/n2.out" 2>"$tmp/n2.err" &
n2=$!
pids+=("$n2")
wait_ready "$tmp/n1.out" 60
wait_ready "$tmp/n2.out" 60
p1=$(port_of "$tmp/n1.out")
p2=$(port_of "$tmp/n2.out")
node1=http://127.0.0.1:$p1
node2=http://127.0.0.1:$p2

start_proxy p --set proxy.prefill=127.0.0.1:$p1 --set proxy.decode=127.0.0.1:$p2
pd=$proxy_pid
purl=$proxy_url
check "ready line is exact" grep -qE '^listening on http://127\.0\.0\.1:[0-9]+$' "$tmp/p.out"
check "stdout holds only the ready line" test "$(wc -l <"$tmp/p.out")" -eq 1

req='{"prompt": [1, 17, 42, 99, 7, 3, 250, 12, 64, 5, 88, 21, 33, 9, 140, 2, 77, 18, 6], "max_tokens": 12, "temperature": 0}'
code=$(curl_ -o "$tmp/via_proxy" -w '%{http_code}' "$purl/v1/completions" -d "$req")
check "a completion through the proxy is 200" test "$code" = 200
# The prefill node got one request (max_tokens 1) and the decode node the original.
check "the prefill node was asked" grep -q '^ordo_requests_total{status="ok"} 1$' <<<"$(curl_ "$node1/metrics")"
check "the prefill node sampled one token" grep -q '^ordo_generation_tokens_total 1$' <<<"$(curl_ "$node1/metrics")"
check "the decode node sampled all 12" grep -q '^ordo_generation_tokens_total 12$' <<<"$(curl_ "$node2/metrics")"
curl_ "$node2/v1/completions" -d "$req" >"$tmp/direct"
via=$(digest_of <"$tmp/via_proxy")
direct=$(digest_of <"$tmp/direct")
check "the proxy's answer carries a digest" test -n "$via"
check "the proxy's answer has the digest of one node's" test "$via" = "$direct"
check "the decode node computed the whole answer" grep -q '"completion_tokens":12' "$tmp/via_proxy"

sreq='{"prompt": [1, 17, 42, 99, 7, 3, 250, 12, 64, 5, 88, 21, 33, 9, 140, 2, 77, 18, 6], "max_tokens": 12, "temperature": 0, "stream": true}'
curl_ -D "$tmp/sse_head" "$purl/v1/completions" -d "$sreq" >"$tmp/sse"
check "a streamed request is 200" grep -q '^HTTP/1.1 200' "$tmp/sse_head"
check "a streamed answer is an event stream" grep -qi '^content-type: text/event-stream' "$tmp/sse_head"
check "a streamed answer ends with data: [DONE]" test "$(grep -v '^\s*$' "$tmp/sse" | tail -1 | tr -d '\r')" = "data: [DONE]"
check "a streamed answer has the digest of the whole one" test "$(digest_of <"$tmp/sse")" = "$direct"

creq='{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}], "max_tokens": 6, "temperature": 0}'
code=$(curl_ -o "$tmp/chat" -w '%{http_code}' "$purl/v1/chat/completions" -d "$creq")
check "a chat completion through the proxy is 200" test "$code" = 200
check "a chat answer is a chat.completion" grep -q '"object":"chat.completion"' "$tmp/chat"
check "a chat answer has the digest of one node's" \
  test "$(digest_of <"$tmp/chat")" = "$(curl_ "$node1/v1/chat/completions" -d "$creq" | digest_of)"

# A node's error comes back as the node gave it (status and body).
curl_ -o "$tmp/bad_direct" "$node2/v1/completions" -d '{"prompt": [1, 2], "max_tokens": -1}'
code=$(curl_ -o "$tmp/bad_proxy" -w '%{http_code}' "$purl/v1/completions" -d '{"prompt": [1, 2], "max_tokens": -1}')
check "a node's 400 comes back as 400" test "$code" = 400
check "a node's 400 body comes back byte for byte" cmp -s "$tmp/bad_direct" "$tmp/bad_proxy"

health=$(curl_ "$purl/health")
check "health lists prefill and decode, ok" \
  test "$health" = "{\"decode\":[{\"endpoint\":\"127.0.0.1:$p2\",\"ok\":true}],\"prefill\":[{\"endpoint\":\"127.0.0.1:$p1\",\"ok\":true}],\"status\":\"ok\"}"
code=$(curl_ -o "$tmp/404" -w '%{http_code}' "$purl/nope")
check "an unknown path is 404" test "$code" = 404
check "a 404 has the node's error shape" grep -q '^{"error":{"code":null,"message":"no route for GET /nope; try' "$tmp/404"
check "GET on /v1/completions is 405" test "$(curl_ -o /dev/null -w '%{http_code}' "$purl/v1/completions")" = 405
check "GET /v1/models is the decode node's" test "$(curl_ "$purl/v1/models")" = "$(curl_ "$node2/v1/models")"

curl_ "$purl/metrics" >"$tmp/metrics"
check "metrics count the P/D requests" grep -q '^ordo_proxy_requests_total{outcome="pd"} 4$' "$tmp/metrics"
check "metrics count no prefill failure yet" grep -q '^ordo_proxy_prefill_failures_total 0$' "$tmp/metrics"
check "metrics time the upstream requests" grep -q '^ordo_proxy_upstream_seconds_count{role="decode"} 4$' "$tmp/metrics"
if command -v promtool >/dev/null; then
  check "promtool finds no problem in /metrics" bash -c 'test -z "$(promtool check metrics <"$1" 2>&1)"' _ "$tmp/metrics"
fi

# A taken port: exit 1 naming it.
pport=$(port_of "$tmp/p.out")
timeout 20 "$ordo" proxy --config configs/proxy.toml --set proxy.decode=127.0.0.1:$p2 --port "$pport" >"$tmp/out" 2>"$tmp/err"
check "a taken --port exits 1" test $? -eq 1
check "a taken --port is named" grep -q "cannot listen on http://127.0.0.1:$pport" "$tmp/err"
check "a proxy that could not listen prints nothing on stdout" test ! -s "$tmp/out"

# SIGHUP is ignored; SIGTERM stops it with 0.
kill -HUP "$pd"
sleep 0.2
check "SIGHUP leaves it serving" grep -q '"status":"ok"' <<<"$(curl_ "$purl/health")"
stop_pid "$pd"
check "SIGTERM exits 0 within 10 s" test "$code" -eq 0
check "the stop is logged" grep -q "ordo proxy: SIGTERM: draining" "$tmp/p.err"

# --- prefill down: decode-only, counted ---------------------------------------------------------
dead=$(dead_port)
start_proxy pdead --set proxy.prefill=127.0.0.1:$dead --set proxy.decode=127.0.0.1:$p2
code=$(curl_ -o "$tmp/decode_only" -w '%{http_code}' "$proxy_url/v1/completions" -d "$req")
check "with prefill down a completion is still 200" test "$code" = 200
check "with prefill down the answer is the same" test "$(digest_of <"$tmp/decode_only")" = "$direct"
curl_ "$proxy_url/metrics" >"$tmp/metrics2"
check "the prefill failure is counted" grep -q '^ordo_proxy_prefill_failures_total 1$' "$tmp/metrics2"
check "the request is counted decode-only" grep -q '^ordo_proxy_requests_total{outcome="decode_only"} 1$' "$tmp/metrics2"
check "health shows the prefill node down" \
  grep -q "\"prefill\":\[{\"endpoint\":\"127.0.0.1:$dead\",\"error\":\"connection refused\",\"ok\":false}\]" <<<"$(curl_ "$proxy_url/health")"
check "the prefill failure is logged" grep -q "prefill on 127.0.0.1:$dead failed: connection refused" "$tmp/pdead.err"
stop_pid "$proxy_pid"
check "SIGTERM exits 0 (prefill down)" test "$code" -eq 0

# A prefill node that accepts but never answers: timed out after proxy.timeout_s, then decode-only.
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print("listening on http://127.0.0.1:%d" % s.getsockname()[1], flush=True); time.sleep(60)' >"$tmp/hang.out" &
hang=$!
pids+=("$hang")
wait_ready "$tmp/hang.out"
start_proxy phang --set proxy.prefill=127.0.0.1:$(port_of "$tmp/hang.out") --set proxy.decode=127.0.0.1:$p2 --set proxy.timeout_s=1
code=$(curl_ -o "$tmp/hang_answer" -w '%{http_code}' "$proxy_url/v1/completions" -d "$req")
check "with a silent prefill node a completion is still 200" test "$code" = 200
check "with a silent prefill node the answer is the same" test "$(digest_of <"$tmp/hang_answer")" = "$direct"
check "the silent prefill node's timeout is logged" grep -q "failed: timed out after 1 s" "$tmp/phang.err"
stop_pid "$proxy_pid"
kill -TERM "$hang" 2>/dev/null

# --- decode down: 502 naming the endpoints tried ------------------------------------------------
dead2=$(dead_port)
start_proxy ddead --set proxy.prefill=127.0.0.1:$p1 --set proxy.decode="127.0.0.1:$dead,127.0.0.1:$dead2"
code=$(curl_ -o "$tmp/502" -w '%{http_code}' "$proxy_url/v1/completions" -d "$req")
check "with decode down the answer is 502" test "$code" = 502
check "the 502 names every decode endpoint tried" \
  bash -c 'grep -q "no decode node answered; tried " "$1" && grep -q "127.0.0.1:$2 (connection refused)" "$1" && grep -q "127.0.0.1:$3 (connection refused)" "$1"' _ "$tmp/502" "$dead" "$dead2"
check "the 502 has the node's error shape" grep -q '"type":"server_error"' "$tmp/502"
check "the 502 is counted" grep -q '^ordo_proxy_requests_total{outcome="no_decode"} 1$' <<<"$(curl_ "$proxy_url/metrics")"
kill -INT "$proxy_pid"
wait_exit "$proxy_pid" 10
check "SIGINT exits 0" test "$code" -eq 0

# --- the API key --------------------------------------------------------------------------------
start_proxy key --set proxy.decode=127.0.0.1:$p2 --set proxy.api_key=sk-test-123
check "without the key /v1 is 401" test "$(curl_ -o /dev/null -w '%{http_code}' "$proxy_url/v1/completions" -d "$req")" = 401
check "a wrong key is 401" \
  test "$(curl_ -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' "$proxy_url/v1/completions" -d "$req")" = 401
code=$(curl_ -o "$tmp/keyed" -w '%{http_code}' -H 'Authorization: Bearer sk-test-123' "$proxy_url/v1/completions" -d "$req")
check "with the key it is 200 (decode-only: no prefill configured)" test "$code" = 200
check "health stays open" test "$(curl_ -o /dev/null -w '%{http_code}' "$proxy_url/health")" = 200
check "the key is never logged" bash -c '! grep -q sk-test-123 "$1"' _ "$tmp/key.err"
stop_pid "$proxy_pid"

# --- the exact upstream requests, against fake nodes ---------------------------------------------
cat >"$tmp/fake.py" <<'EOF'
# A fake node: records each request (path, Authorization, body) as a JSON line; a prefill fake
# answers 200 with signed-looking kv_transfer_params when the prompt is "kv", unsigned ones when it
# is "unsigned"; a decode fake answers 418.
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
role, log = sys.argv[1], sys.argv[2]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path, "auth": self.headers.get("Authorization"), "body": body}) + "\n")
        if role == "sse":  # one event, a pause, the end: the proxy must pass the first one on at once
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"data: first\n\n")
            self.wfile.flush()
            time.sleep(1.5)
            self.wfile.write(b"data: [DONE]\n\n")
            return
        if role == "prefill":
            out = {"id": "p", "choices": [{"text": "x"}]}
            if json.loads(body).get("prompt") == "kv":
                out["kv_transfer_params"] = {"remote_engine_id": "e-1", "remote_block_ids": [4, 5], "signature": "ab" * 32}
            if json.loads(body).get("prompt") == "unsigned":
                out["kv_transfer_params"] = {"remote_host": "127.0.0.1", "remote_port": 9}
            status, data = 200, json.dumps(out).encode()
        else:
            status, data = 418, b'{"teapot": "short and stout"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening on http://127.0.0.1:%d" % s.server_address[1], flush=True)
s.serve_forever()
EOF
python3 "$tmp/fake.py" prefill "$tmp/fp.log" >"$tmp/fp.out" 2>"$tmp/fp.err" &
fp=$!
pids+=("$fp")
python3 "$tmp/fake.py" decode "$tmp/fd.log" >"$tmp/fd.out" 2>"$tmp/fd.err" &
fd=$!
pids+=("$fd")
wait_ready "$tmp/fp.out"
wait_ready "$tmp/fd.out"
start_proxy fake --set proxy.prefill=127.0.0.1:$(port_of "$tmp/fp.out") --set proxy.decode=127.0.0.1:$(port_of "$tmp/fd.out")
# The client names a peer of its own: the proxy drops it (a client chooses no peer).
orig='{"prompt": "kv", "max_tokens": 9, "stream": true, "stream_options": {"include_usage": true}, "temperature": 0, "kv_transfer_params": {"remote_host": "10.6.6.6", "remote_port": 666, "transfer_id": "mine"}}'
code=$(curl_ -o "$tmp/teapot" -w '%{http_code}' -H 'Authorization: Bearer tok-1' "$proxy_url/v1/completions" -d "$orig")
check "the decode node's status comes back as is" test "$code" = 418
check "the decode node's body comes back byte for byte" test "$(cat "$tmp/teapot")" = '{"teapot": "short and stout"}'
plain='{"prompt": "plain", "max_tokens": 3}'
curl_ -o /dev/null "$proxy_url/v1/chat/completions" -d "$plain"
unsigned='{"prompt": "unsigned", "max_tokens": 3, "kv_transfer_params": {"remote_host": "10.6.6.6", "remote_port": 666}}'
curl_ -o /dev/null "$proxy_url/v1/completions" -d "$unsigned"
cat >"$tmp/check.py" <<'EOF'
import json, sys
fp = [json.loads(l) for l in open(sys.argv[1])]
fd = [json.loads(l) for l in open(sys.argv[2])]
orig = json.loads(sys.argv[3])
assert len(fp) == 3 and len(fd) == 3, (len(fp), len(fd))
p = json.loads(fp[0]["body"])
want = dict(orig, max_tokens=1, stream=False,
            kv_transfer_params={"do_remote_decode": True, "do_remote_prefill": False})
del want["stream_options"]
assert p == want, ("prefill body", p)
assert fp[0]["path"] == "/v1/completions" and fp[0]["auth"] == "Bearer tok-1", fp[0]
d = json.loads(fd[0]["body"])
assert d == dict(orig, kv_transfer_params={"remote_engine_id": "e-1", "remote_block_ids": [4, 5], "signature": "ab" * 32}), ("decode body", d)
assert fd[0]["path"] == "/v1/completions" and fd[0]["auth"] == "Bearer tok-1", fd[0]
# No kv_transfer_params in the prefill answer: the decode node gets the original bytes.
assert fp[1]["path"] == "/v1/chat/completions" and fp[1]["auth"] is None
assert fd[1]["body"] == sys.argv[4], ("unchanged body", fd[1]["body"])
# The prefill node answered unsigned parameters, and the client sent its own: neither reaches the decode node.
u = json.loads(fd[2]["body"])
assert "kv_transfer_params" not in u and u["prompt"] == "unsigned", ("unsigned", u)
assert "10.6.6.6" not in fp[2]["body"], ("the client's peer reached the prefill node", fp[2]["body"])
EOF
check "prefill and decode get vLLM's P/D requests (auth forwarded)" \
  python3 "$tmp/check.py" "$tmp/fp.log" "$tmp/fd.log" "$orig" "$plain"
stop_pid "$proxy_pid"
check "SIGTERM exits 0 (fake nodes)" test "$code" -eq 0

# A stream is passed on as it arrives, and SIGTERM waits for it (drain).
python3 "$tmp/fake.py" sse "$tmp/fs.log" >"$tmp/fs.out" 2>"$tmp/fs.err" &
fs=$!
pids+=("$fs")
wait_ready "$tmp/fs.out"
start_proxy sse --set proxy.decode=127.0.0.1:$(port_of "$tmp/fs.out")
cat >"$tmp/stream.py" <<'EOF'
import http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
t0 = time.time()
c.request("POST", "/v1/completions", body='{"prompt": [1, 2], "stream": true}', headers={"Content-Type": "application/json"})
r = c.getresponse()
first = r.readline()
t_first = time.time() - t0
rest = r.read()
t_all = time.time() - t0
print("%d %r %.2f %.2f %r" % (r.status, first, t_first, t_all, rest))
assert r.status == 200 and first == b"data: first\n" and t_first < t_all - 1.0 and t_all >= 1.4
assert rest.endswith(b"data: [DONE]\n\n")
EOF
# A client that hangs up mid-stream is counted cancelled (the upstream call is cut).
python3 - "$(port_of "$tmp/sse.out")" <<'EOF'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
c.request("POST", "/v1/completions", body='{"prompt": [1, 2], "stream": true}', headers={"Content-Type": "application/json"})
c.getresponse().readline()
c.sock.close()
EOF
for _ in $(seq 1 100); do
  grep -q '^ordo_proxy_requests_total{outcome="cancelled"} 1$' <<<"$(curl_ "$proxy_url/metrics")" && break
  sleep 0.1
done
check "a client that hangs up mid-stream is counted cancelled" \
  grep -q '^ordo_proxy_requests_total{outcome="cancelled"} 1$' <<<"$(curl_ "$proxy_url/metrics")"
python3 "$tmp/stream.py" "$(port_of "$tmp/sse.out")" >"$tmp/stream.txt" 2>&1 &
client=$!
# SIGTERM once the stream is in flight (bounded: a loaded machine may take a while to connect).
for _ in $(seq 1 100); do
  grep -q '^ordo_proxy_requests_in_flight 1$' <<<"$(curl_ "$proxy_url/metrics")" && break
  sleep 0.05
done
kill -TERM "$proxy_pid"
wait_exit "$client" 10
check "a stream's first event arrives before its end, and SIGTERM lets it finish" test "$code" -eq 0
wait_exit "$proxy_pid" 10
check "SIGTERM during a stream exits 0" test "$code" -eq 0
kill -TERM "$fp" "$fd" "$fs" 2>/dev/null

stop_pid "$n1"
stop_pid "$n2"
finish
