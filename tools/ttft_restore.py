#!/usr/bin/env python3
"""Time to first token of a long prompt: recomputed, reused from HBM, restored from the host tier.

Starts `ordo node` with the host tier on (kv_transfer.connector = offload); for each --tokens length
sends one prompt of that many token ids with max_tokens 1 three times: cold, again (HBM hit), and
again after POST /admin/evict {"tier":"hbm"} (restored from the host tier). All three must give the
same logits digest. The node's time to ready (a checkpoint's read and upload) is printed too. The transfer floor is the bytes the restore loaded over the pinned host->device
peak that `ordo bench copy` measures on the same device just before.
Prints a table and one `BENCH_JSON {...}` line. Python standard library only (runs on the GPU
machine as is):

  python3 tools/ttft_restore.py --ordo gpu-bundle/run --config configs/dense.toml \
      --set model.size=1b --set device.kind=hip --tokens 32767
"""
import argparse
import json
import random
import re
import subprocess
import sys
import time
import urllib.request


def post(port, path, body, timeout):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def metric(port, series):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def report(a, tokens, rows, loaded, peak_h2d, startup):
    """Prints one length's rows, its floor and limit and its BENCH_JSON line; True when the digests agree."""
    digests = {o["logits_digest"] for _, _, o in rows}
    floor = loaded / (peak_h2d * 1e9) if peak_h2d > 0 else 0.0
    cold, hbm, restore = rows[0][1], rows[1][1], rows[2][1]
    limit = hbm + 1.5 * floor
    print(f"prompt {tokens} tokens")
    print(f"{'path':<20} {'resume_at':>9} {'from hbm':>9} {'from cpu':>9} {'TTFT s':>9} {'vs cold':>8}")
    for name, wall, o in rows:
        print(f"{name:<20} {o['resume_at']:>9} {o['from']['hbm']:>9} {o['from']['cpu']:>9} {wall:>9.3f} "
              f"{cold / wall if wall > 0 else 0:>7.1f}x")
    print(f"transfer floor: {loaded / 1e6:.1f} MB loaded / {peak_h2d:.1f} GB/s pinned peak = {floor:.4f} s; "
          f"restore TTFT / floor = {restore / floor if floor > 0 else 0:.1f}; "
          f"limit HBM hit + 1.5 x floor = {limit:.3f} s: {'within' if restore <= limit else 'OVER'}")
    print("digests equal: " + ("yes" if len(digests) == 1 else "NO " + str(digests)))
    print("BENCH_JSON " + json.dumps({
        "bench": "ttft_restore", "config": a.config, "sets": a.set, "tokens": tokens,
        "node_ready_s": startup,
        "ttft_cold_s": cold, "ttft_hbm_s": hbm, "ttft_restore_s": restore,
        "restore_resume_at": rows[2][2]["resume_at"], "restore_from_cpu": rows[2][2]["from"]["cpu"],
        "bytes_loaded": loaded, "peak_h2d_gbps": peak_h2d, "transfer_floor_s": floor,
        "restore_limit_s": limit, "within_limit": restore <= limit,
        "digests_equal": len(digests) == 1}, sort_keys=True), flush=True)
    return len(digests) == 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ordo", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--tokens", type=int, nargs="+", default=[32767],
                    help="one or more prompt lengths, each its own prompt, all on one node")
    ap.add_argument("--timeout", type=float, default=400)
    a = ap.parse_args()
    sets = a.set + ["kv_transfer.connector=offload", "server.port=0"]
    set_args = [x for s in sets for x in ("--set", s)]

    copy = subprocess.run([a.ordo, "bench", "copy", "--config", a.config] + set_args[:-2], capture_output=True,
                          text=True, timeout=300)
    line = [l for l in copy.stdout.splitlines() if l.startswith("BENCH_JSON ")]
    if copy.returncode != 0 or not line:
        sys.exit("ordo bench copy failed: " + copy.stderr[-2000:])
    peak_h2d = json.loads(line[0][len("BENCH_JSON "):])["peak_h2d_gbps"]

    t_start = time.perf_counter()
    node = subprocess.Popen([a.ordo, "node", "--config", a.config] + set_args, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    ok = True
    try:
        first = node.stdout.readline()
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", first)
        if not m:
            sys.exit("ordo node did not start: " + first)
        startup = time.perf_counter() - t_start  # the checkpoint read and the weights uploaded
        print(f"ttft_restore: {a.config} {' '.join(a.set)} | max_tokens 1 | node ready in {startup:.1f} s",
              flush=True)
        port = int(m.group(1))
        for i, tokens in enumerate(a.tokens):
            rng = random.Random(32768 + i)  # one prompt per length, none a prefix of another
            prompt = [rng.randrange(256) for _ in range(tokens)]
            body = {"prompt": prompt, "max_tokens": 1, "temperature": 0}
            rows = []
            for name in ("recompute (cold)", "hbm hit", "host tier restore"):
                if name == "host tier restore":
                    post(port, "/admin/evict", {"tier": "hbm"}, a.timeout)
                    loaded_before = metric(port, 'ordo_offload_bytes_total{direction="load"}')
                t = time.perf_counter()
                r = post(port, "/v1/completions", body, a.timeout)
                wall = time.perf_counter() - t
                rows.append((name, wall, r["ordo"]))
            loaded = metric(port, 'ordo_offload_bytes_total{direction="load"}') - loaded_before
            ok = report(a, tokens, rows, loaded, peak_h2d, startup) and ok
    finally:
        node.terminate()
        node.wait(timeout=60)

    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
