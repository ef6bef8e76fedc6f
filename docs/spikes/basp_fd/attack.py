#!/usr/bin/env python3
"""Attack harness for the basp_fd spike (issue 36).

usage: attack.py PROBE_BINARY CERT_DIR [server-auth|server-plain|server-tls|client ...]

For each server kind: start `probe <kind> PORT ...`, fire each payload at its port,
then report whether the process is still alive (or which signal ended it), its RSS,
and whether a legitimate client (client-auth / client-tls / client-plain) still gets
42 back. "client" mode runs a fake server that answers junk, to check the OUTGOING
side: client-auth must refuse at the preamble, client-plain is the baseline.
"""
import os, resource, signal, socket, ssl, subprocess, sys, time

PROBE, CERTS = sys.argv[1], sys.argv[2]
KINDS = sys.argv[3:] or ["server-plain", "server-auth", "server-tls", "client"]
KEY = "11" * 32
BAD = "22" * 32
HDR_4G = b"\x01\x00\x00\x00\xff\xff\xff\xff" + bytes(24)  # client_handshake, payload_len 4 GiB
PAYLOADS = {
    "forged-a": bytes(15) + b"\x01" + bytes(16),
    "forged-b": b"\x01" + bytes(31),
    "junk": bytes(8) + b"J" * 24,
}
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))


def rss_mb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None


def send_raw(port, data, hold=0.3):
    s = socket.create_connection(("127.0.0.1", port))
    try:
        s.sendall(data)
        time.sleep(hold)
    except OSError:
        pass
    s.close()


def tls_ctx(cert=None):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    c.check_hostname = False
    c.load_verify_locations(f"{CERTS}/ca.pem")
    if cert:
        c.load_cert_chain(f"{CERTS}/{cert}.pem", f"{CERTS}/{cert}.key")
    return c


def send_tls(port, data, cert=None, hold=0.3):
    """TLS handshake (no client cert, or a rogue one), then the payload."""
    raw = socket.create_connection(("127.0.0.1", port))
    try:
        s = tls_ctx(cert).wrap_socket(raw)
        s.sendall(data)
        time.sleep(hold)
        got = s.recv(64)  # TLS 1.3: the refusal (an alert) shows up here
        return "handshake ok, then recv %r" % got[:8]
    except (OSError, ssl.SSLError) as e:
        return "refused: %s" % str(e)[:80]
    finally:
        raw.close()


def length_claim(port, secs=3.0):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(HDR_4G)
    t = time.time()
    try:
        while time.time() - t < secs:
            s.sendall(bytes(1 << 20))  # trickle zeros as "payload"
            time.sleep(0.05)
    except OSError:
        pass
    s.close()


def idle(port, n=2000, secs=3.0, mid=None):
    socks = []
    for _ in range(n):
        try:
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    t0 = time.time()
    during = mid() if mid else ""  # a legitimate client while the idle sockets are held
    time.sleep(max(0.0, secs - (time.time() - t0)))
    closed = 0
    for s in socks:  # how many has the server dropped by now?
        s.setblocking(False)
        try:
            if s.recv(4096, socket.MSG_PEEK) == b"":
                closed += 1
            else:
                # data (e.g. our nonce) pending: peek past it
                d = s.recv(4096)
                try:
                    if s.recv(1) == b"":
                        closed += 1
                except BlockingIOError:
                    pass
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return socks, "%d opened, %d closed by server after %.0fs; legit client while held: %s" % (
        len(socks), closed, secs, during)


def legit(kind, port):
    cmd = {"server-auth": [PROBE, "client-auth", str(port), KEY],
           "server-tls": [PROBE, "client-tls", str(port), CERTS],
           "server-plain": [PROBE, "client-plain", str(port)]}[kind]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
        return "client ok" if r.returncode == 0 else "client rc=%d %s" % (r.returncode, r.stdout.strip()[-60:])
    except subprocess.TimeoutExpired:
        return "client TIMEOUT"


def state(p):
    rc = p.poll()
    if rc is None:
        return "alive rss=%sMB" % rss_mb(p.pid)
    return "DEAD (%s)" % (signal.Signals(-rc).name if rc < 0 else "rc=%d" % rc)


def run_server(kind, port):
    args = {"server-auth": [KEY], "server-tls": [CERTS], "server-plain": []}[kind]
    print(f"== {kind} port {port}")

    def start():
        p = subprocess.Popen([PROBE, kind, str(port)] + args, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        return p

    p = start()
    print(f"  baseline: {state(p)}, {legit(kind, port)}")
    tests = [(n, (lambda d=d: send_raw(port, d))) for n, d in PAYLOADS.items()]
    tests.append(("random 20x4KiB", lambda: [send_raw(port, os.urandom(4096), 0.05) for _ in range(20)]))
    tests.append(("len-4GiB 3s", lambda: length_claim(port)))
    if kind == "server-tls":
        for n, d in PAYLOADS.items():
            tests.append((f"tls-nocert+{n}", (lambda d=d: print("    ", send_tls(port, d)))))
            tests.append((f"tls-rogue+{n}", (lambda d=d: print("    ", send_tls(port, d, "rogue")))))
    if kind == "server-auth":
        tests.append(("wrong-key client", lambda: print("    ", legit_bad(port))))
    for name, fn in tests:
        if p.poll() is not None:
            p = start()  # restart after a crash so the next payload is measured too
        before = rss_mb(p.pid)
        fn()
        time.sleep(0.5)
        print(f"  {name:22s} before={before}MB -> {state(p)}, {legit(kind, port) if p.poll() is None else '-'}")
    if p.poll() is not None:
        p = start()
    socks, what = idle(port, mid=lambda: legit(kind, port))
    print(f"  idle 2000: {what}; then: {state(p)}, {legit(kind, port) if p.poll() is None else '-'}")
    for s in socks:
        s.close()
    if p.poll() is None:
        p.stdin.close()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()


def legit_bad(port):
    r = subprocess.run([PROBE, "client-auth", str(port), BAD], capture_output=True, text=True, timeout=15)
    return "wrong-key client rc=%d %s" % (r.returncode, r.stdout.strip())


def run_client_side(port):
    """A 'listed peer' that answers junk: does the OUTGOING side survive?"""
    print(f"== client side vs a junk-answering peer on {port}")
    for name, data in PAYLOADS.items():
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen(4)
        for mode in ["client-plain", "client-auth"]:
            cmd = [PROBE, mode, str(port)] + ([KEY] if mode == "client-auth" else [])
            c = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            conn, _ = srv.accept()
            conn.sendall(data)
            try:
                out, _ = c.communicate(timeout=8)
            except subprocess.TimeoutExpired:
                c.kill()
                out, _ = c.communicate()
            conn.close()
            rc = c.returncode
            how = signal.Signals(-rc).name if rc < 0 else "rc=%d" % rc
            print(f"  {name:9s} {mode:12s} -> {how} {out.strip()[-70:]!r}")
        srv.close()


port = 47400
for k in KINDS:
    port += 1
    if k == "client":
        run_client_side(port)
    else:
        run_server(k, port)
