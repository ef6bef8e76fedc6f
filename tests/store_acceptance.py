#!/usr/bin/env python3
"""Issue 12's acceptance with real processes on loopback (port 0): `ordo store` and `ordo node`s
with kv_transfer.connector = "store". Run by tests/cli_store_node.sh: store_acceptance.py ORDO.

Every wait is bounded; every process started here is stopped by its pid (SIGTERM, then SIGKILL).
Prints one line per check and `N passed, M failed`; exits 1 if any failed.
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ORDO = os.path.abspath(sys.argv[1])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TMP = tempfile.mkdtemp(prefix="ordo-store-acc-")
HYBRID = os.path.join(ROOT, "configs/offload.toml")  # qsa_gdn_ple tiny, block 64, chunk 256
# Extra `--set`s for every node, e.g. ORDO_NODE_SET="device.kind=hip" on the GPU machine.
NODE_SET = os.environ.get("ORDO_NODE_SET", "").split()
passed = failed = 0
procs = []


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok:", name)
    else:
        failed += 1
        print("FAILED:", name, detail)


class Proc:
    """One `ordo` process; `start` waits (bounded) for its `listening on` line."""

    count = 0

    def __init__(self, args, name):
        Proc.count += 1
        self.name = name
        self.out = os.path.join(TMP, f"{Proc.count:02d}-{name}.out")
        self.err = os.path.join(TMP, f"{Proc.count:02d}-{name}.err")
        self.args = args
        self.p = None
        self.http = self.tcp = None

    def start(self, wait=True, timeout=30):
        self.p = subprocess.Popen([ORDO] + self.args, stdout=open(self.out, "w"), stderr=open(self.err, "w"),
                                  cwd=ROOT)
        procs.append(self)
        if not wait:
            return self
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = open(self.out).read()
            m = re.search(r"listening on http://(\S+)(?: tcp://(\S+))?", text)
            if m:
                self.http, self.tcp = m.group(1), m.group(2)
                return self
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.p.returncode} before serving: {self.log()}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} printed no ready line within {timeout} s: {self.log()}")

    def log(self):
        return open(self.err).read()[-3000:]

    def wait_exit(self, timeout):
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.p and self.p.poll() is None:
            self.p.send_signal(sig)
            if self.wait_exit(timeout) is None:
                self.p.kill()
                self.p.wait(timeout=10)
        return self.p.returncode if self.p else None


def store(*sets, port=None):
    args = ["store", "--config", os.path.join(ROOT, "configs/store.toml")]
    for s in sets:
        args += ["--set", s]
    if port:
        args += ["--port", str(port)]
    return Proc(args, "store")


def node(store_proc, *sets, config=HYBRID, name="node"):
    args = ["node", "--config", config, "--port", "0", "--set", "kv_transfer.connector=store",
            "--set", f"store.address={store_proc.tcp}"]
    for s in NODE_SET + list(sets):
        args += ["--set", s]
    return Proc(args, name)


def http(method, endpoint, path, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{endpoint}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def prompt(tokens, seed):
    """Prefix-stable: the first n tokens of (N, seed) equal (n, seed)."""
    rng = random.Random(seed)
    return [rng.randrange(256) for _ in range(tokens)]


def send(endpoint, tokens, seed, max_tokens=8):
    status, body = http("POST", endpoint, "/v1/completions",
                        {"prompt": prompt(tokens, seed), "max_tokens": max_tokens, "temperature": 0}, timeout=120)
    if status != 200:
        return {"status": status, "body": body}
    o = body["ordo"]
    return {"status": 200, "resume_at": o["resume_at"], "from": o["from"], "digest": o["logits_digest"],
            "reason": o.get("reason", "")}


def evict_hbm(endpoint):
    return http("POST", endpoint, "/admin/evict", {"tier": "hbm"})[0] == 200


def health(endpoint):
    return http("GET", endpoint, "/health")[1]


def metric(endpoint, name):
    text = http("GET", endpoint, "/metrics")[1]
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    if not m:
        raise AssertionError("GET %s/metrics has no series %s" % (endpoint, name))
    return float(m.group(1))


def wait_for(cond, timeout, step=0.1):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False


def main():
    # Cold references: a node without any host tier.
    ref = Proc(["node", "--config", HYBRID, "--port", "0", "--set", "kv_transfer.connector=none"] +
               [a for s in NODE_SET for a in ("--set", s)], "ref").start()
    cases = [(768, 1), (1000, 2), (1300, 2), (1050, 3), (768, 4), (768, 5), (768, 6), (768, 7)]
    cold = {c: send(ref.http, *c)["digest"] for c in cases}
    ref.stop()

    # --- restart against the same store (block granularity) ---------------------------------
    s = store().start()
    a = node(s, name="a").start()
    r = send(a.http, 768, 1)
    check("a cold 768-token request through the store answers the cold digest",
          r["status"] == 200 and r["digest"] == cold[(768, 1)], r)
    check("the node's /health names its engine id and a connected store",
          health(a.http).get("engine_id", "").startswith("node-") and health(a.http)["store"]["connected"] is True,
          health(a.http))
    check("ordo_store_connected is 1", metric(a.http, "ordo_store_connected") == 1)
    check("the node stops on SIGTERM", a.stop() == 0)
    a2 = node(s, name="a2").start()
    r = send(a2.http, 768, 1)
    check("a restarted node resumes the 768-token hybrid prompt at 704 from the store",
          r["status"] == 200 and r["resume_at"] == 704 and r["from"]["store"] > 0 and r["from"]["cpu"] == 0, r)
    check("... with the cold digest", r.get("digest") == cold[(768, 1)], r)

    # --- two nodes on one store ---------------------------------------------------------------
    b = node(s, name="b").start()
    r1 = send(a2.http, 768, 4)
    r2 = send(b.http, 768, 4)
    check("a prompt computed on one node resumes from the store on another",
          r2["status"] == 200 and r2["resume_at"] == 704 and r2["from"]["store"] > 0, r2)
    check("... both digests equal the cold one", r1.get("digest") == r2.get("digest") == cold[(768, 4)], (r1, r2))
    b_id = health(b.http)["engine_id"]
    dup = node(s, f"node.engine_id={b_id}", name="dup").start(wait=False)
    code = dup.wait_exit(30)
    check("a node forced to a connected node's identity is refused at start (exit 1)", code == 1, code)
    check("... the refusal names that identity", b_id in dup.log() and "already connected" in dup.log(), dup.log())
    exp = node(s, "store.expect_identity=store-0000000000000000", name="expect").start(wait=False)
    code = exp.wait_exit(30)
    store_id = health(s.http)["engine_id"]
    check("store.expect_identity refuses another store (exit 1), naming both identities",
          code == 1 and store_id in exp.log() and "store-0000000000000000" in exp.log(), exp.log())

    # --- store.transport = "tcp": the bytes travel as CAF messages, the objects are the same -----
    t = node(s, "store.transport=tcp", name="tcp").start()
    r = send(t.http, 768, 1)
    check("tcp transport: a node resumes at 704 from objects a shm node saved, with the cold digest",
          r["status"] == 200 and r["resume_at"] == 704 and r["from"]["store"] > 0 and r["digest"] == cold[(768, 1)], r)
    send(t.http, 768, 7)
    r = send(b.http, 768, 7)
    check("... and a shm node resumes from what the tcp node saved, with the cold digest",
          r["status"] == 200 and r["resume_at"] == 704 and r["from"]["store"] > 0 and r["digest"] == cold[(768, 7)], r)
    t.stop()

    # --- namespaces: another model on the same store sees nothing of this one ------------------
    other = node(s, "cache.block_size=16", name="other-ns").start()
    r = send(other.http, 768, 1)
    check("a node of another namespace does not see this namespace's objects",
          r["status"] == 200 and r["from"]["store"] == 0, r)
    other.stop()

    # --- fp8 KV (scale planes travel with the pages) through the store -----------------------------
    f1 = node(s, "model.kv_dtype=fp8", name="fp8").start()
    cold_fp8 = send(f1.http, 768, 1)
    f1.stop()
    f2 = node(s, "model.kv_dtype=fp8", name="fp8-restarted").start()
    r = send(f2.http, 768, 1)
    check("fp8 KV: a restarted node resumes at 704 from the store with the cold digest",
          r["status"] == 200 and r["resume_at"] == 704 and r["from"]["store"] > 0 and
          r["digest"] == cold_fp8.get("digest"), (cold_fp8, r))
    f2.stop()

    # --- a hung store (SIGSTOP): every request meets its deadline, then the node reconnects -------
    hung = node(s, "store.deadline_ms=1000", name="deadline").start()
    s.p.send_signal(signal.SIGSTOP)
    t0 = time.time()
    r = send(hung.http, 768, 6)
    took = time.time() - t0
    check("with the store stopped a request is answered exactly after the store's deadline",
          r["status"] == 200 and r["digest"] == cold[(768, 6)] and took < 10, (r, took))
    h = health(hung.http)
    check("... /health names the failed store request",
          h["store"]["connected"] is False and "request_timeout" in h["store"].get("error", ""), h)
    s.p.send_signal(signal.SIGCONT)
    check("after SIGCONT the node reconnects", wait_for(lambda: health(hung.http)["store"]["connected"] is True, 15),
          health(hung.http))
    hung.stop()

    # --- SIGKILL of the store during traffic ----------------------------------------------------
    evict_hbm(b.http)
    results = []

    def traffic(seed):
        for k in range(4):
            evict_hbm(b.http)
            results.append((seed, send(b.http, 768, seed)))

    threads = [threading.Thread(target=traffic, args=(seed,)) for seed in (5, 6)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    port = s.tcp.rsplit(":", 1)[1]
    s.stop(signal.SIGKILL)
    for t in threads:
        t.join(timeout=120)
    check("traffic through a SIGKILLed store: every request answered, no hang",
          len(results) == 8 and not any(t.is_alive() for t in threads), results)
    check("... every digest equals the cold one",
          all(r["status"] == 200 and r["digest"] == cold[(768, seed)] for seed, r in results), results)
    # The node learns of the death from its connection (a down message, milliseconds): bounded wait.
    wait_for(lambda: health(b.http)["store"]["connected"] is False, 10)
    h = health(b.http)
    check("/health reports the store unreachable while the node serves",
          h["status"] == "ok" and h["store"]["connected"] is False and h["store"]["status"] == "unreachable", h)
    check("ordo_store_connected drops to 0", metric(b.http, "ordo_store_connected") == 0)
    r = send(b.http, 768, 1)
    check("without a store the node recomputes, exactly", r["status"] == 200 and r["digest"] == cold[(768, 1)], r)
    s2 = store(port=port).start()
    check("the store restarts on its port", s2.tcp.endswith(":" + port), s2.tcp)
    check("the node reconnects by itself (within 15 s)",
          wait_for(lambda: health(b.http)["store"]["connected"] is True, 15), health(b.http))
    evict_hbm(b.http)  # its HBM copy was computed without a store: saves happen only where it computes
    r1 = send(b.http, 768, 1)
    evict_hbm(b.http)
    r2 = send(b.http, 768, 1)
    check("after reconnecting it saves again: the next request resumes at 704 from the new store",
          r2["status"] == 200 and r2["resume_at"] == 704 and r2["from"]["store"] > 0, r2)
    check("... digests equal the cold one", r1.get("digest") == r2.get("digest") == cold[(768, 1)], (r1, r2))
    for p in (a2, b, s2):
        p.stop()

    # --- chunk granularity: the seed's table, through a restarted node, traced -------------------
    sc = store("store.granularity=chunk").start()
    c = node(sc, name="chunk").start()
    for case in [(768, 1), (1000, 2), (1050, 3)]:
        r = send(c.http, *case)
        check(f"chunk store: a cold {case[0]}-token run answers the cold digest", r.get("digest") == cold[case], r)
    c.stop()
    trace = os.path.join(TMP, "chunk.trace")
    c2 = node(sc, f"trace.path={trace}", name="chunk2").start()
    for (n, seed), want in [((768, 1), 512), ((1000, 2), 768), ((1300, 2), 768), ((1050, 3), 1024)]:
        evict_hbm(c2.http)  # the 1300-token continuation must not find the 1000 in HBM
        r = send(c2.http, n, seed)
        check(f"chunk store: a restarted node resumes {n} tokens at {want}",
              r["status"] == 200 and r["resume_at"] == want and r["from"]["store"] > 0, r)
        check(f"... with the cold digest ({n})", r.get("digest") == cold[(n, seed)], r)
    check("chunk node stops", c2.stop() == 0)
    out = subprocess.run([ORDO, "trace", "check", trace], capture_output=True, text=True, timeout=120)
    check("the recorded trace of the run through the store checks clean", out.returncode == 0,
          out.stdout[-2000:] + out.stderr[-2000:])
    sc.stop()


try:
    main()
except Exception as e:  # a setup failure is a failed check, with the processes' logs
    check("setup", False, repr(e))
finally:
    for p in procs:
        p.stop(signal.SIGKILL, timeout=10)
    if failed:
        for p in procs:
            print(f"--- {p.name} stderr ---\n{p.log()}")
    else:
        shutil.rmtree(TMP, ignore_errors=True)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
