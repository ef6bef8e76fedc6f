#!/usr/bin/env python3
"""Issue 42, items 1 and 4, in one device call: the torch anchors of dense 1b decode, checked against
each other, the weight-streaming floor, and torch's cuBLAS at ordo's projection shapes.

  PYTHONUNBUFFERED=1 python3 tools/torch_anchors.py [--out DIR] [--quick]

1. card: name, the datasheet HBM bandwidth and bf16 dense peak it is judged by (H100 SXM 3.35 TB/s,
   H200 4.8 TB/s; 989 TFLOP/s both), and what a device copy and an 8192^3 bf16 matmul reach here;
2. `torch_reference.py --check-graph` (tiny fp32: every graph decode variant's tokens = the eager
   decode's);
3. ms per decode step (prompt 512, decode 32, batch 1/8/16; bf16 and fp32), device time, median of
   3 rounds of 32 replays of one captured step:
     ref     tools/torch_reference.py's static step, ordo's seeded weights (the fixed anchor)
     legacy  the step before issue 42 (enable_gqa with the mask)
     ref/gqa the fixed step with enable_gqa (isolates the attention backend)
     ref/rep the fixed step with K/V expanded by repeat_interleave
     plain   tools/torch_plain_anchor.py, an independent implementation (K/V expanded)
     plain/gqa  the same with enable_gqa
   and the floor: weight bytes streamed per step / the datasheet bandwidth;
4. what the slow step runs: one eager step under the profiler (kernels per step, summed kernel
   time, the costliest kernels);
5. torch.matmul (cuBLAS, bf16) at ordo's projection shapes for decode (1/8/16 rows) and prefill
   (2048-token steps), over 16 layers' weights, with % of the bf16 dense peak and of the HBM
   bandwidth, and whether a row's result depends on the batch (row 0 of an M-row product against
   the 1-row product, bitwise).
Prints one table last and an `ANCHORS_JSON {...}` line; writes both to DIR/anchors.{txt,json}.
"""
import argparse
import json
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_plain_anchor as plain  # noqa: E402
import torch_reference as tr  # noqa: E402

BATCHES = (1, 8, 16)
PROMPT, STEPS = 512, 32


def card():
    name = torch.cuda.get_device_name()
    if "H200" in name:
        return name, "H200", 4.8e12, 989e12
    if "H100" in name and "PCIe" in name:
        return name, "H100 PCIe", 2.0e12, 756e12
    if "H100" in name:
        return name, "H100 SXM", 3.35e12, 989e12
    return name, name, float("nan"), float("nan")


def events_ms(fn, iters):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / iters


def ceilings():
    n = 1 << 29  # 1 GiB of bf16
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    b.copy_(a)
    ms = events_ms(lambda: b.copy_(a), 10)
    copy_bw = 2 * a.numel() * 2 / (ms * 1e-3)
    del a, b
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(x, y)
    ms = events_ms(lambda: torch.matmul(x, y), 10)
    return copy_bw, 2 * 8192 ** 3 / (ms * 1e-3)


# ---------------------------------------------------------------- decode anchors


REF_VARIANTS = {"ref": ("grouped", False, True), "legacy": ("gqa", True, False), "ref/gqa": ("gqa", False, True),
                "ref/rep": ("repeat", False, True)}


def ref_decode(dtype_name, log, names):
    """torch_reference's dense 1b: ms per step for the fixed step and its variants, per batch."""
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    d = tr.dims_of("dense", "1b")
    m = tr.build_model(d, 0, "cuda", dtype)
    cos, sin = tr.rope_table(d, PROMPT + STEPS + 4, "cuda")
    gqa = tr.gqa_supported("cuda")
    wbytes = sum(t.numel() * t.element_size() for L in m["layers"] for k, t in L.items() if k != "kind") + \
        m["lm_head"].numel() * m["lm_head"].element_size() + m["final_norm"].numel() * m["final_norm"].element_size()
    res, toks = {}, {}
    variants = [(k,) + REF_VARIANTS[k] for k in names]
    for b in BATCHES:
        caches = {}
        with torch.inference_mode():
            for aligned in sorted({v[3] for v in variants}):
                n = PROMPT + STEPS + 1
                c = tr.Cache(d, b, tr.graph_cache_len(n) if aligned else n, "cuda", dtype)
                last = []
                for r in range(b):
                    t = torch.tensor([tr.prompt_tokens(r, PROMPT, d["vocab"])], device="cuda")
                    last.append(tr.forward(d, m, c, t, torch.tensor([r], device="cuda"), 0, cos, sin, gqa).argmax(-1))
                caches[aligned] = (c, torch.cat(last).view(b, 1))
            for name, attn, legacy, aligned in variants:
                c, first = caches[aligned]
                try:
                    _, dev_ms, out = tr.graph_decode(d, m, c, first, PROMPT, STEPS, cos, sin, "cuda", attn, legacy, 3)
                    res.setdefault(name, {})[b] = dev_ms / STEPS
                    toks.setdefault(name, {})[b] = out
                except Exception as e:  # keep the rest of the call
                    log("  %s %s batch %d failed: %s" % (name, dtype_name, b, e))
                    res.setdefault(name, {})[b] = float("nan")
            log("  torch_reference %s batch %2d: %s" % (dtype_name, b, "  ".join(
                "%s %.3f" % (k, res[k][b]) for k, *_ in variants)))
            # the fixed step's tokens against the legacy step's (same weights, same prompt)
            if "ref" in toks and b in toks["ref"] and "legacy" in toks and b in toks["legacy"]:
                same = (toks["ref"][b] == toks["legacy"][b]).float().mean().item()
                res.setdefault("tokens_equal_ref_vs_legacy", {})[b] = same
                log("    tokens of ref = legacy: %.1f %% of %d" % (100 * same, toks["ref"][b].numel()))
        del caches
    del m
    torch.cuda.empty_cache()
    return res, wbytes


def plain_decode(dtype_name, log, modes=("repeat",)):
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    res, wbytes = {}, 0
    for gqa in modes:
        name = "plain" if gqa == "repeat" else "plain/gqa"
        model = plain.build(dtype, gqa)
        wbytes = plain.weight_bytes(model)
        for b in BATCHES:
            try:
                res.setdefault(name, {})[b] = plain.decode_ms(model, b, PROMPT, STEPS)
            except Exception as e:
                log("  %s %s batch %d failed: %s" % (name, dtype_name, b, e))
                res.setdefault(name, {})[b] = float("nan")
        log("  torch_plain_anchor %s %s: %s" % (dtype_name, name, "  ".join("b%d %.3f" % (b, res[name][b]) for b in BATCHES)))
        del model
        torch.cuda.empty_cache()
    return res, wbytes


def profile_step(dtype_name, batch, legacy, attn, log, models, top=6):
    """One eager step of torch_reference's static decode under the profiler."""
    from torch.profiler import ProfilerActivity, profile
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    d = tr.dims_of("dense", "1b")
    if dtype_name not in models:
        models.clear()
        torch.cuda.empty_cache()
        models[dtype_name] = tr.build_model(d, 0, "cuda", dtype)
    m = models[dtype_name]
    cos, sin = tr.rope_table(d, PROMPT + STEPS + 4, "cuda")
    n = PROMPT + STEPS + 1
    c = tr.Cache(d, batch, n if legacy else tr.graph_cache_len(n), "cuda", dtype)
    mask_base = torch.arange(c.layers[0]["k"].shape[2], device="cuda")
    tok = torch.zeros(batch, 1, dtype=torch.long, device="cuda")
    pos = torch.tensor([PROMPT], device="cuda")
    cosf, sinf = tr.rope_tables_rotate(cos, sin)
    if legacy:
        step = lambda: tr.decode_step_legacy(d, m, c, tok, pos, cos, sin, mask_base, attn == "gqa")
    else:
        step = lambda: tr.decode_step_static(d, m, c, tok, pos, cosf, sinf, mask_base, attn)
    with torch.inference_mode():
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
    kernels = {}
    count, total = 0, 0.0
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            t = ev.time_range.elapsed_us()
            k = kernels.setdefault(ev.name, [0, 0.0])
            k[0] += 1
            k[1] += t
            count += 1
            total += t
    label = "%s %s batch %d (%s)" % ("legacy" if legacy else "fixed", dtype_name, batch, attn)
    log("  profile %s: %d kernels per step, %.3f ms of kernel time" % (label, count, total / 1e3))
    for name, (n_, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]:
        log("    %7.3f ms %4d x  %s" % (t / 1e3, n_, name[:110]))
    del c
    return {"label": label, "kernels": count, "kernel_ms": total / 1e3,
            "top": [[name[:110], n_, t / 1e3] for name, (n_, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]]}


# ---------------------------------------------------------------- cuBLAS reference rows


def matmul_rows(d, peak, bw, log, rows_list=(1, 8, 16, 2048), layers=16):
    """torch.matmul(x [M, K], W^T) in bf16 for ordo's dense projections, over `layers` distinct
    weights (as a step reads them), timed as replays of a captured graph."""
    dm, mlp = d["d_model"], d["mlp_dim"]
    qd, kvd = d["nq"] * d["head_dim"], d["nkv"] * d["head_dim"]
    shapes = [("qkv", qd + 2 * kvd, dm), ("o", dm, qd), ("gate_up", 2 * mlp, dm), ("down", dm, mlp)]
    gen = torch.Generator(device="cuda").manual_seed(42)
    out = []
    for name, n, k in shapes:
        ws = [(torch.rand(n, k, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1).mul_(
            (3.0 / k) ** 0.5).to(torch.bfloat16) for _ in range(layers)]
        for rows in rows_list:
            x = torch.randn(rows, k, device="cuda", generator=gen).to(torch.bfloat16)
            y = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
            reps = 3 if rows >= 1024 else 20
            for w in ws:
                torch.matmul(x, w.t(), out=y)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for w in ws:
                    torch.matmul(x, w.t(), out=y)
            torch.cuda.current_stream().wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(reps):
                    for w in ws:
                        torch.matmul(x, w.t(), out=y)
            g.replay()
            torch.cuda.synchronize()
            t = sorted(events_ms(g.replay, 1) for _ in range(5))[2] / (reps * layers)
            del g
            # batch invariance: row 0 of the M-row product against the product of row 0 alone
            if rows > 1:
                full = torch.matmul(x, ws[0].t())
                one = torch.matmul(x[:1].clone(), ws[0].t())
                inv = bool(torch.equal(full[:1], one))
                maxdiff = (full[:1].float() - one.float()).abs().max().item()
            else:
                inv, maxdiff = True, 0.0
            flops = 2.0 * rows * n * k
            byts = 2.0 * (n * k + rows * k + rows * n)
            r = {"shape": name, "n": n, "k": k, "rows": rows, "ms": t, "tflops": flops / (t * 1e-3) / 1e12,
                 "pct_peak": 100 * flops / (t * 1e-3) / peak, "gbps": byts / (t * 1e-3) / 1e9,
                 "pct_bw": 100 * byts / (t * 1e-3) / bw, "row0_equal_alone": inv, "row0_maxdiff": maxdiff}
            out.append(r)
            log("  matmul %-7s %5d x %5d x %5d: %8.4f ms  %6.1f TFLOP/s (%4.1f %% peak)  %6.0f GB/s (%4.1f %% bw)  "
                "row 0 = alone: %s" % (name, rows, n, k, t, r["tflops"], r["pct_peak"], r["gbps"], r["pct_bw"], inv))
        del ws
    torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------- main


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp"))
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--budget-s", type=float, default=80.0,
                   help="skip the optional parts (extra profiles, check-graph, extra variants) past this many seconds")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "anchors.txt"), "w")

    def log(s=""):
        print(s, flush=True)
        logf.write(s + "\n")
        logf.flush()

    t_start = time.perf_counter()
    plain.setup(False)  # no TF32, cuDNN SDPA off: as torch_reference.py's bench
    name, short, bw, peak = card()
    copy_bw, mm_flops = ceilings()
    log("card %s (%s: %.2f TB/s, bf16 dense %.0f TFLOP/s by the datasheet); torch %s; measured: device copy %.2f TB/s "
        "(read + write), 8192^3 bf16 matmul %.0f TFLOP/s" % (name, short, bw / 1e12, peak / 1e12, torch.__version__,
                                                              copy_bw / 1e12, mm_flops / 1e12))
    J = {"card": name, "card_short": short, "hbm_bw": bw, "bf16_peak": peak, "measured_copy_bw": copy_bw,
         "measured_bf16_matmul": mm_flops, "torch": torch.__version__, "prompt_tokens": PROMPT, "decode_steps": STEPS}

    left = lambda: args.budget_s - (time.perf_counter() - t_start)
    dec, wb = {}, {}
    for dt, names in (("bf16", ("ref", "legacy", "ref/gqa")), ("fp32", ("ref", "legacy"))):
        log("== decode anchors, %s" % dt)
        r, wb[dt] = ref_decode(dt, log, names)
        pr, pwb = plain_decode(dt, log)
        r.update(pr)
        dec[dt] = r
        log("  weights streamed per step: torch_reference %.3f GB, plain %.3f GB (%.0f s left)" %
            (wb[dt] / 1e9, pwb / 1e9, left()))
    J["decode_ms_per_step"] = dec
    J["weight_bytes"] = wb
    J["floor_ms"] = {dt: wb[dt] / bw * 1e3 for dt in wb}
    J["floor_ms_measured_copy_bw"] = {dt: wb[dt] / copy_bw * 1e3 for dt in wb}

    log("== torch.matmul (cuBLAS, bf16) at ordo's dense 1b projection shapes: NOT batch-invariant, not an ordo mode")
    d = tr.dims_of("dense", "1b")
    mm = []
    try:
        mm = matmul_rows(d, peak, bw, log)
    except Exception:
        log(traceback.format_exc())
    J["matmul"] = mm

    log("== what one step runs (eager, profiler)")
    prof, models = [], {}
    for dt, b, legacy, attn in (("bf16", 16, True, "gqa"), ("bf16", 16, False, "grouped"), ("bf16", 1, True, "gqa"),
                                ("bf16", 1, False, "grouped"), ("fp32", 16, True, "gqa"), ("fp32", 16, False, "grouped")):
        if left() < 20 and prof:
            log("  (skipped the other profiles: time budget)")
            break
        try:
            prof.append(profile_step(dt, b, legacy, attn, log, models))
        except Exception as e:
            log("  profile %s %d failed: %s" % (dt, b, e))
    models.clear()
    torch.cuda.empty_cache()
    J["profile"] = prof

    if not args.skip_check and left() > 10:
        log("== torch_reference --check-graph")
        try:
            tr.check_graph(argparse.Namespace())
            J["check_graph"] = "PASS"
        except SystemExit:
            J["check_graph"] = "FAIL"
        except Exception as e:
            J["check_graph"] = "ERROR %s" % e
            log(traceback.format_exc())
    if left() > 15:
        log("== extra: plain bf16 with enable_gqa + mask")
        dec["bf16"].update(plain_decode("bf16", log, ("native",))[0])
    if left() > 30:
        log("== extra: torch_reference bf16, K/V repeat_interleave")
        dec["bf16"].update(ref_decode("bf16", log, ("ref/rep",))[0])

    agg = {}
    for rows in (1, 8, 16, 2048):
        rs = [r for r in mm if r["rows"] == rows]
        if len(rs) == 4:
            ms = 16 * sum(r["ms"] for r in rs)
            fl = 16 * sum(2.0 * rows * r["n"] * r["k"] for r in rs)
            agg[rows] = {"ms_16_layers": ms, "pct_peak": 100 * fl / (ms * 1e-3) / peak,
                         "batch_invariant": all(r["row0_equal_alone"] for r in rs)}
    J["matmul_step"] = agg

    # ------------------------------------------------------------ the table
    log("")
    log("== ms per decode step, dense 1b, prompt %d, decode %d, %s (%s), torch %s" % (PROMPT, STEPS, name, short,
                                                                                      torch.__version__))
    log("%-58s %9s %9s %9s" % ("", "batch 1", "batch 8", "batch 16"))
    rows = [("bf16", "ref", "torch_reference --cuda-graph bf16 (fixed)"),
            ("bf16", "plain", "torch_plain_anchor bf16 (independent)"),
            ("bf16", "legacy", "torch_reference bf16, step before issue 42"),
            ("bf16", "ref/gqa", "  fixed step but enable_gqa + mask"),
            ("bf16", "ref/rep", "  fixed step, K/V repeat_interleave"),
            ("bf16", "plain/gqa", "  plain, enable_gqa + mask"),
            ("fp32", "ref", "torch_reference --cuda-graph fp32 (fixed)"),
            ("fp32", "plain", "torch_plain_anchor fp32"),
            ("fp32", "legacy", "torch_reference fp32, step before issue 42"),
            ("fp32", "plain/gqa", "  plain fp32, enable_gqa + mask")]
    for dt, k, label in rows:
        v = dec.get(dt, {}).get(k, {})
        log("%-58s %9s %9s %9s" % (label, *["%.3f" % v[b] if b in v else "-" for b in BATCHES]))
    for dt in ("bf16", "fp32"):
        log("%-58s %9.3f %9.3f %9.3f" % ("weight-streaming floor %s (%.2f GB / %.2f TB/s)" % (dt, wb[dt] / 1e9, bw / 1e12),
                                         *[J["floor_ms"][dt]] * 3))
    for dt in ("bf16", "fp32"):
        a, b_ = dec[dt].get("ref", {}), dec[dt].get("plain", {})
        log("%-58s %9s %9s %9s" % ("%s fixed ÷ plain" % dt, *["%.2f" % (a[b] / b_[b]) if b in a and b in b_ else "-"
                                                           for b in BATCHES]))
        c = dec[dt].get("legacy", {})
        log("%-58s %9s %9s %9s" % ("%s legacy ÷ fixed" % dt, *["%.2f" % (c[b] / a[b]) if b in a and b in c else "-"
                                                            for b in BATCHES]))
    if agg:
        log("")
        log("torch.matmul, cuBLAS bf16, 16 layers of qkv + o + gate_up + down (not batch-invariant):")
        for rows_, a in agg.items():
            log("  %4d rows: %7.3f ms, %5.1f %% of %.0f TFLOP/s, row 0 = row 0 alone in every shape: %s" %
                (rows_, a["ms_16_layers"], a["pct_peak"], peak / 1e12, a["batch_invariant"]))
    J["seconds"] = time.perf_counter() - t_start
    log("check-graph: %s; %.0f s" % (J.get("check_graph", "skipped"), J["seconds"]))
    line = json.dumps(J, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
    with open(os.path.join(args.out, "anchors.json"), "w") as f:
        f.write(line + "\n")
    short_j = {k: J[k] for k in ("card", "card_short", "hbm_bw", "bf16_peak", "measured_copy_bw", "measured_bf16_matmul",
                                 "torch", "check_graph", "decode_ms_per_step", "floor_ms", "matmul_step") if k in J}
    print("ANCHORS_JSON " + json.dumps(short_j, default=str) + "  (everything, matmul rows and profiles too: anchors.json)")


if __name__ == "__main__":
    main()
