#!/usr/bin/env python3
"""Soak test: many mixed requests against one real `ordo node`, valid and hostile at once.

Starts `ordo node` (by default configs/offload.toml: host tier on, a small store and pool so
blocks and objects are evicted, chaos on), measures every distinct valid request alone first
(its solo logits digest), then sends --requests requests from --clients threads:

  valid completions, whole and streamed (SSE), text and token-id prompts, greedy and seeded;
  valid chat completions; malformed bodies (bad JSON, wrong types, deep nesting, huge values);
  raw garbage on the socket; clients that hang up mid-request or mid-stream (RST or FIN);
  /health, /metrics and POST /admin/evict (hbm and cpu) in between.

It checks that the node stays up, that every valid response carries its solo digest, that every
malformed one gets a 4xx naming what was wrong, that the node's open file descriptors return to
their count after warm-up, and that its resident memory stops growing (no growth over the second
half beyond --rss-slack). Prints a table and one `SOAK_JSON {...}` line; exits 1 on any failure.
Python standard library only:

  python3 tools/soak.py --ordo build/ordo --requests 10000
"""
import argparse
import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time

PROMPTS = [
    "Once upon a time there was a node that never crashed.",
    "The quick brown fox jumps over the lazy dog. " * 6,
    "In the beginning the prefix cache was empty, and every token was computed. " * 4,
    "Hybrid models keep recurrent state; a restored request must equal its cold run. " * 9,
    "Ordering is data: clears, loads, restores, forward, copies, saves. " * 14,
    "A short one.",
]


class node_process:
    def __init__(self, ordo, config, sets):
        args = [ordo, "node", "--config", config, "--port", "0"]
        for s in sets:
            args += ["--set", s]
        self.err = open(os.devnull, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            sys.exit("soak: the node did not start: " + repr(line))
        self.port = int(m.group(1))

    def alive(self):
        return self.proc.poll() is None

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


def http(port, method, path, body=None, timeout=120, stream=False):
    """One request on a fresh connection; returns (status, headers, body bytes)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        head = f"{method} {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        s.sendall(head.encode() + b"\r\n" + data)
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if headers.get("transfer-encoding") == "chunked":
        rest = dechunk(rest)
    return status, headers, rest


def dechunk(data):
    out, i = [], 0
    while i < len(data):
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        size = int(data[i:j].split(b";")[0], 16)
        if size == 0:
            break
        out.append(data[j + 2:j + 2 + size])
        i = j + 2 + size + 2
    return b"".join(out)


def digest_of(status, body, stream):
    if status != 200:
        return None
    if not stream:
        return json.loads(body)["ordo"]["logits_digest"]
    events = [l[6:] for l in body.decode().split("\n") if l.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        return None
    for e in reversed(events[:-1]):
        j = json.loads(e)
        if "ordo" in j:
            return j["ordo"]["logits_digest"]
    return None


def valid_requests():
    """Every distinct valid request: (path, body) — streamed variants share the solo digest."""
    out = []
    for i, p in enumerate(PROMPTS):
        out.append(("/v1/completions", {"prompt": p, "max_tokens": 4 + i % 3}))
        out.append(("/v1/completions", {"prompt": [256] + list(p.encode())[:200], "max_tokens": 3}))
        out.append(("/v1/completions", {"prompt": p, "max_tokens": 4, "temperature": 0.8, "seed": 1000 + i}))
    out.append(("/v1/chat/completions", {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 5}))
    out.append(("/v1/chat/completions", {"messages": [{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": PROMPTS[3]}], "max_tokens": 4}))
    return out


MALFORMED = [
    (b'{"prompt": "a", "max_tokens": "many"}', "max_tokens"),
    (b'{"prompt": 5}', "prompt"),
    (b'{"prompt": "a", "temperature": -1}', "temperature"),
    (b'{"prompt": "a", "max_tokens": 10000000}', "max_tokens"),
    (b'{"prompt": ""}', "prompt"),
    (b'{"prompt": "a", "stream": "yes"}', "stream"),
    (b'{"prompt": "a", "media": [{"offset": 0}]}', "media[0]"),
    (b'{"prompt": [1, 2, 99999]}', "prompt[2]"),
    (b'{"prompt": "a", "max_tokens": ' + b"[" * 50000 + b"]" * 50000 + b"}", "nest"),
    (b'{"prompt": "a", "seed": ' + b"[" * 30 + b"1" + b"]" * 30 + b"}", "seed"),
    (b'{"prompt": "a"', "JSON"),
    (b'[1, 2, 3]', "object"),
    (b'{"prompt": "a", "stop": [1, 2]}', "stop"),
]


class soak:
    def __init__(self, a, node, solo):
        self.a, self.node, self.solo = a, node, solo
        self.lock = threading.Lock()
        self.counts = {}
        self.failures = []
        self.next = 0
        self.samples = []  # (requests done, fds, rss KiB)

    def count(self, what, ok=True, detail=""):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1
            if not ok and len(self.failures) < 20:
                self.failures.append(f"{what}: {detail}")

    def take(self):
        with self.lock:
            if self.next >= self.a.requests:
                return None
            self.next += 1
            return self.next

    def one(self, rng):
        port, kind = self.node.port, rng.random()
        if kind < 0.40:  # valid, whole or streamed
            path, body = rng.choice(list(self.solo.keys()))
            body = json.loads(body)
            stream = rng.random() < 0.35
            if stream:
                body["stream"] = True
            st, _, data = http(port, "POST", path, body)
            got = digest_of(st, data, stream)
            want = self.solo[(path, json.dumps({k: v for k, v in body.items() if k != "stream"}, sort_keys=True))]
            self.count("valid streamed" if stream else "valid", got == want,
                       f"{path} {json.dumps(body)[:80]}: status {st}, digest {got} != solo {want}")
        elif kind < 0.60:  # malformed body
            data, field = rng.choice(MALFORMED)
            st, _, out = http(port, "POST", "/v1/completions", data)
            ok = 400 <= st < 500 and len(out) < 1024
            if ok and field not in ("nest", "JSON", "object"):
                ok = field in json.loads(out)["error"]["message"]
            self.count("malformed", ok, f"{data[:60]!r}: status {st} {out[:200]!r}")
        elif kind < 0.70:  # garbage bytes
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 400))) + b"\r\n\r\n")
            s.settimeout(30)
            try:
                reply = s.recv(4096)
            except (ConnectionResetError, socket.timeout):
                reply = b""
            s.close()
            self.count("garbage", not reply.startswith(b"HTTP/1.1 2"), repr(reply[:80]))
        elif kind < 0.88:  # hang up mid-request or mid-stream
            path, body = rng.choice(list(self.solo.keys()))
            body = json.loads(body)
            body["stream"] = rng.random() < 0.5
            body["max_tokens"] = 40
            data = json.dumps(body).encode()
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: soak\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
            if rng.random() < 0.5:
                try:
                    s.recv(rng.randint(1, 300))
                except socket.timeout:
                    pass
            else:
                time.sleep(rng.random() * 0.05)
            if rng.random() < 0.5:  # RST instead of FIN
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
            self.count("hung up")
        elif kind < 0.95:
            st, _, out = http(port, "GET", rng.choice(["/health", "/metrics", "/v1/models"]))
            self.count("health/metrics/models", st == 200, f"status {st}")
        else:
            tier = rng.choice(["hbm", "cpu"])
            st, _, out = http(port, "POST", "/admin/evict", {"tier": tier})
            self.count("evict " + tier, st == 200, f"status {st} {out[:100]!r}")

    def client(self, seed):
        rng = random.Random(seed)
        while True:
            n = self.take()
            if n is None:
                return
            try:
                self.one(rng)
            except Exception as e:  # noqa: BLE001 — any client-side error is a finding
                self.count("client error", False, repr(e))
            if n % self.a.sample_every == 0 and self.node.alive():
                with self.lock:
                    self.samples.append((n, self.node.fds(), self.node.rss_kib()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ordo", default="build/ordo")
    ap.add_argument("--config", default="configs/offload.toml")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sample-every", type=int, default=250)
    ap.add_argument("--rss-slack", type=float, default=0.05, help="allowed RSS growth over the second half")
    a = ap.parse_args()
    sets = ["device.chaos_seed=11", "cache.num_blocks=96", "store.capacity_mb=4", "log.level=warn"] + a.set
    node = node_process(a.ordo, a.config, sets)
    try:
        solo = {}
        for path, body in valid_requests():
            st, _, data = http(node.port, "POST", path, body)
            if st != 200:
                sys.exit(f"soak: solo run of {path} {json.dumps(body)[:80]} answered {st}: {data[:300]!r}")
            solo[(path, json.dumps(body, sort_keys=True))] = digest_of(st, data, False)
        fds_start, rss_start = node.fds(), node.rss_kib()
        t0 = time.time()
        s = soak(a, node, solo)
        threads = [threading.Thread(target=s.client, args=(a.seed * 1000 + i,)) for i in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.time() - t0
        alive = node.alive()
        # Hung-up requests finish or are cancelled within a few steps; connections linger ≤ 2 s.
        fds_end = fds_start
        for _ in range(100):
            if not alive:
                break
            fds_end = node.fds()
            if fds_end <= fds_start:
                break
            time.sleep(0.1)
        st, _, metrics = http(node.port, "GET", "/metrics") if alive else (0, {}, b"")
        cancelled = re.search(rb'^ordo_requests_total\{status="cancelled"\} (\S+)$', metrics, re.M)
        rss = [r for _, _, r in s.samples]
        half = rss[len(rss) // 2] if rss else 0
        growth = (max(rss[len(rss) // 2:]) - half) / half if rss else 0.0
    finally:
        code = node.stop()
    ok = (alive and not s.failures and fds_end <= fds_start and growth <= a.rss_slack and code == 0)
    print(f"{'what':<24}{'count':>8}")
    for k in sorted(s.counts):
        print(f"{k:<24}{s.counts[k]:>8}")
    print(f"requests {a.requests} in {elapsed:.1f} s from {a.clients} clients; node alive {alive}, exit {code}")
    print(f"open fds: {fds_start} after warm-up, {fds_end} at the end")
    print(f"RSS KiB: {rss_start} after warm-up, {half} at half time, max {max(rss) if rss else 0}; "
          f"growth over the second half {growth * 100:.2f}% (allowed {a.rss_slack * 100:.0f}%)")
    print("cancelled (ordo_requests_total{status=\"cancelled\"}):", cancelled.group(1).decode() if cancelled else "absent")
    for f in s.failures:
        print("FAILED:", f)
    print("SOAK_JSON " + json.dumps({"requests": a.requests, "seconds": round(elapsed, 1), "alive": alive,
                                     "exit_code": code, "failures": len(s.failures), "fds_start": fds_start,
                                     "fds_end": fds_end, "rss_kib_start": rss_start, "rss_kib_half": half,
                                     "rss_kib_max": max(rss) if rss else 0, "rss_growth_second_half": growth,
                                     "counts": s.counts, "ok": ok}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
