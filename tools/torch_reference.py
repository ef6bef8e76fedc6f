#!/usr/bin/env python3
"""PyTorch reference for ordo's `dense` and `gdn_hybrid` presets (issue 5).

Builds the SAME seeded weights as runtime/model.cpp (value = f(uniform_pm1(hash3(seed, tensor_id,
index))), kernels/cpu/hash.hpp) vectorised on the GPU with int64 ops, follows the architecture of
model::enqueue_forward (pre-norm residual, RoPE in halves, GQA, SwiGLU, final norm + LM head),
and times prefill / decode like `ordo bench forward`, printing one `BENCH_JSON {...}` line per
batch size with the same keys.

  python3 tools/torch_reference.py --preset dense --size 1b --dtype bf16 --batch 1 8
  python3 tools/torch_reference.py --check-logits          # tiny dense, seed 0, first 8 logits
  python3 tools/torch_reference.py --preset dense --size 1b --dtype fp32 --batch 1 8 16 --cuda-graph
                                   # decode with a static KV cache, the step captured in one CUDA graph
  python3 tools/torch_reference.py --check-graph           # the graph decode's tokens = the eager decode's

Deliberately simple: contiguous KV cache, F.scaled_dot_product_attention, and a per-token Python
loop for the gated delta net (no chunked kernel), so gdn numbers are a naive lower bound.

The --cuda-graph decode step (decode_step_static) is the fair anchor of issue 42: weights and the
static KV cache in the model's dtype, q and k roped together, and GQA done inside SDPA by viewing
the g q heads of a kv head as g query rows (--attn grouped), so that the mask goes to a fused
kernel instead of the math backend that enable_gqa with a mask falls back to (--attn gqa, and
--legacy-step for the step as it was). tools/torch_anchors.py times it against an independent
implementation (tools/torch_plain_anchor.py), the weight-streaming floor and cuBLAS in one call.
"""
import argparse
import json
import math
import time

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- dims (runtime/model_presets.cpp)


def dims_of(preset, size):
    d = dict(vocab=258, rope_base=10000.0, norm_eps=1e-6, conv_width=4)
    if size == "tiny":
        d.update(d_model=64, mlp_dim=128, num_layers=4, nq=4, nkv=2, head_dim=16, max_context=4096,
                 gdn_heads=4, gdn_dk=16, gdn_dv=16)
    else:
        d.update(d_model=2048, mlp_dim=5632, num_layers=16, nq=16, nkv=4, head_dim=128, max_context=32768,
                 gdn_heads=16, gdn_dk=128, gdn_dv=128)
    kinds = []
    for l in range(d["num_layers"]):
        if preset == "dense":
            kinds.append("attention")
        elif preset == "gdn_hybrid":
            kinds.append("attention" if l % 4 == 3 else "gdn")
        else:
            raise SystemExit("preset %s not implemented (dense, gdn_hybrid)" % preset)
    d["layers"] = kinds
    return d


# ---------------------------------------------------------------- weights (kernels/cpu/hash.hpp)

M64 = (1 << 64) - 1


def _s64(c):
    """Unsigned 64-bit constant as the int64 with the same bits."""
    c &= M64
    return c - (1 << 64) if c >= (1 << 63) else c


GAMMA, C1, C2 = _s64(0x9E3779B97F4A7C15), _s64(0xBF58476D1CE4E5B9), _s64(0x94D049BB133111EB)


def _shr(x, n):
    # logical right shift on int64 bits (torch's >> is arithmetic)
    return (x >> n) & ((1 << (64 - n)) - 1)


def mix64_t(x):
    # int64 add / mul wrap modulo 2^64 on CUDA and CPU, i.e. the same bits as uint64 arithmetic
    x = x + GAMMA
    x = (x ^ _shr(x, 30)) * C1
    x = (x ^ _shr(x, 27)) * C2
    return x ^ _shr(x, 31)


def mix64_py(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def uniform_pm1(seed, tensor_id, count, device):
    prefix = mix64_py(mix64_py(seed & M64) ^ tensor_id)  # scalar part of hash3, exact in Python ints
    idx = torch.arange(count, dtype=torch.int64, device=device)
    h = mix64_t(torch.full_like(idx, _s64(prefix)) ^ idx)
    top24 = _shr(h, 40).to(torch.float32)  # < 2^24: exact in float
    return top24 * (1.0 / 16777216.0) * 2.0 - 1.0  # every step exact in float32


def tensor_id(layer, kind):
    return kind if layer < 0 else 1000 + 64 * layer + kind


T_EMBED, T_FINAL_NORM, T_LM_HEAD = 1, 2, 3
T_LN1, T_LN2, T_WQKV, T_WO, T_WGU, T_WDOWN = 10, 11, 12, 13, 14, 15
T_GDN_IN, T_GDN_ABG, T_GDN_CONV, T_GDN_A_BIAS, T_GDN_OUT = 16, 17, 18, 19, 20


def weight(seed, tid, shape, how, fan_in, device, dtype):
    u = uniform_pm1(seed, tid, int(np.prod(shape)), device)
    if how in ("linear", "conv"):
        scale = np.sqrt(np.float32(3.0) / np.float32(fan_in), dtype=np.float32)  # sqrtf(3.0f / fan_in)
        w = u * torch.tensor(scale, dtype=torch.float32, device=device)
    elif how == "norm":
        w = u * torch.tensor(np.float32(0.1), device=device) + torch.tensor(np.float32(1.0), device=device)
    elif how == "a_bias":
        w = u + torch.tensor(np.float32(2.0), device=device)
    else:
        w = u
    return w.reshape(shape).to(dtype)


def build_model(d, seed, device, dtype):
    dm, mlp = d["d_model"], d["mlp_dim"]
    qd, kvd = d["nq"] * d["head_dim"], d["nkv"] * d["head_dim"]
    H, dk, dv = d["gdn_heads"], d["gdn_dk"], d["gdn_dv"]
    C, G = H * (2 * dk + dv), H * (2 + dv)
    m = {
        "embed": weight(seed, tensor_id(-1, T_EMBED), (d["vocab"], dm), "embed", 1, device, dtype),
        "final_norm": weight(seed, tensor_id(-1, T_FINAL_NORM), (dm,), "norm", 1, device, dtype),
        "lm_head": weight(seed, tensor_id(-1, T_LM_HEAD), (d["vocab"], dm), "linear", dm, device, dtype),
        "layers": [],
    }
    for l, kind in enumerate(d["layers"]):
        L = {"kind": kind}
        L["ln1"] = weight(seed, tensor_id(l, T_LN1), (dm,), "norm", 1, device, dtype)
        L["ln2"] = weight(seed, tensor_id(l, T_LN2), (dm,), "norm", 1, device, dtype)
        L["wgu"] = weight(seed, tensor_id(l, T_WGU), (2 * mlp, dm), "linear", dm, device, dtype)
        L["wdown"] = weight(seed, tensor_id(l, T_WDOWN), (dm, mlp), "linear", mlp, device, dtype)
        if kind == "gdn":
            L["gdn_in"] = weight(seed, tensor_id(l, T_GDN_IN), (C, dm), "linear", dm, device, dtype)
            L["gdn_abg"] = weight(seed, tensor_id(l, T_GDN_ABG), (G, dm), "linear", dm, device, dtype)
            L["gdn_conv"] = weight(seed, tensor_id(l, T_GDN_CONV), (C, d["conv_width"]), "conv", d["conv_width"],
                                   device, dtype)
            L["gdn_a_bias"] = weight(seed, tensor_id(l, T_GDN_A_BIAS), (H,), "a_bias", 1, device, dtype)
            L["wo"] = weight(seed, tensor_id(l, T_GDN_OUT), (dm, H * dv), "linear", H * dv, device, dtype)
        else:
            L["wqkv"] = weight(seed, tensor_id(l, T_WQKV), (qd + 2 * kvd, dm), "linear", dm, device, dtype)
            L["wo"] = weight(seed, tensor_id(l, T_WO), (dm, qd), "linear", qd, device, dtype)
        m["layers"].append(L)
    return m


def rope_table(d, positions, device):
    # host double precision, cast to float, like model::impl::build_rope
    half = d["head_dim"] // 2
    i = np.arange(half, dtype=np.float64)
    inv_freq = np.power(np.float64(d["rope_base"]), -2.0 * i / d["head_dim"])
    ang = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    return (torch.tensor(np.cos(ang).astype(np.float32), device=device),
            torch.tensor(np.sin(ang).astype(np.float32), device=device))


# ---------------------------------------------------------------- forward


class Cache:
    """Contiguous per-layer state: K/V [B, nkv, max_len, hd] for attention; conv window and
    S [B, H, dv, dk] (fp32) for gdn layers."""

    def __init__(self, d, batch, max_len, device, dtype):
        self.len = [0] * batch
        self.layers = []
        H, dk, dv = d["gdn_heads"], d["gdn_dk"], d["gdn_dv"]
        C = H * (2 * dk + dv)
        for kind in d["layers"]:
            if kind == "gdn":
                self.layers.append({"conv": torch.zeros(batch, d["conv_width"] - 1, C, device=device, dtype=dtype),
                                    "S": torch.zeros(batch, H, dv, dk, device=device, dtype=torch.float32)})
            else:
                shape = (batch, d["nkv"], max_len, d["head_dim"])
                self.layers.append({"k": torch.zeros(shape, device=device, dtype=dtype),
                                    "v": torch.zeros(shape, device=device, dtype=dtype)})


def rmsnorm(x, w, eps):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * inv).to(x.dtype) * w


def apply_rope(x, cos, sin):
    # x [B, heads, T, hd]; cos/sin [T, hd/2]; rotate halves (x_i, x_{i+half}) like kernels/cpu/rope.cpp
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).to(x.dtype)


def attention_layer(d, L, st, xn, rows, start, cos, sin, gqa_native):
    # xn [B, T, dm]; all rows of the batch share the same start position
    B, T, _ = xn.shape
    nq, nkv, hd = d["nq"], d["nkv"], d["head_dim"]
    qkv = F.linear(xn, L["wqkv"])
    q = qkv[..., :nq * hd].view(B, T, nq, hd).transpose(1, 2)
    k = qkv[..., nq * hd:(nq + nkv) * hd].view(B, T, nkv, hd).transpose(1, 2)
    v = qkv[..., (nq + nkv) * hd:].view(B, T, nkv, hd).transpose(1, 2)
    c, s = cos[start:start + T], sin[start:start + T]
    q, k = apply_rope(q, c, s), apply_rope(k, c, s)
    st["k"][rows, :, start:start + T] = k
    st["v"][rows, :, start:start + T] = v
    K, V = st["k"][rows, :, :start + T], st["v"][rows, :, :start + T]
    causal = T > 1
    if start > 0 and T > 1:
        raise NotImplementedError("chunked prefill")
    if gqa_native:
        o = F.scaled_dot_product_attention(q, K, V, is_causal=causal, enable_gqa=True)
    else:
        g = nq // nkv  # q head h reads kv head h // g
        o = F.scaled_dot_product_attention(q, K.repeat_interleave(g, 1), V.repeat_interleave(g, 1), is_causal=causal)
    return F.linear(o.transpose(1, 2).reshape(B, T, nq * hd), L["wo"])


def gdn_layer(d, L, st, xn, rows):
    # Naive recurrent gated delta net (kernels/cpu/gdn.cpp), one token at a time.
    B, T, _ = xn.shape
    H, dk, dv, w = d["gdn_heads"], d["gdn_dk"], d["gdn_dv"], d["conv_width"]
    proj = F.linear(xn, L["gdn_in"])  # [B, T, C]
    abg = F.linear(xn, L["gdn_abg"]).float()  # [B, T, G]
    # causal depthwise conv over [window, proj], window = previous w-1 inputs, oldest first
    win = torch.cat([st["conv"][rows], proj], dim=1)  # [B, w-1+T, C]
    st["conv"][rows] = win[:, -(w - 1):]
    conv = F.conv1d(win.transpose(1, 2), L["gdn_conv"].unsqueeze(1), groups=proj.shape[-1])  # [B, C, T]
    x = F.silu(conv.transpose(1, 2).float())  # [B, T, C]
    q = x[..., :H * dk].view(B, T, H, dk)
    k = x[..., H * dk:2 * H * dk].view(B, T, H, dk)
    v = x[..., 2 * H * dk:].view(B, T, H, dv)
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * (1.0 / math.sqrt(dk))
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    decay = torch.sigmoid(abg[..., :H] + L["gdn_a_bias"].float())  # [B, T, H]
    beta = torch.sigmoid(abg[..., H:2 * H])
    gate = abg[..., 2 * H:].view(B, T, H, dv)
    S = st["S"][rows]  # [B, H, dv, dk]
    outs = []
    for t in range(T):
        kt = k[:, t]  # [B, H, dk]
        S = S * decay[:, t, :, None, None]
        delta = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhij,bhj->bhi", S, kt))  # [B, H, dv]
        S = S + delta[..., None] * kt[:, :, None, :]
        outs.append(torch.einsum("bhij,bhj->bhi", S, q[:, t]))
    st["S"][rows] = S
    o = torch.stack(outs, dim=1) * F.silu(gate)  # [B, T, H, dv]
    return F.linear(o.reshape(B, T, H * dv).to(xn.dtype), L["wo"])


def forward(d, m, cache, tokens, rows, start, cos, sin, gqa_native):
    """tokens [B, T] for cache rows `rows` starting at position `start`; returns last-position logits."""
    h = F.embedding(tokens, m["embed"])
    for L, st in zip(m["layers"], cache.layers):
        xn = rmsnorm(h, L["ln1"], d["norm_eps"])
        if L["kind"] == "gdn":
            h = h + gdn_layer(d, L, st, xn, rows)
        else:
            h = h + attention_layer(d, L, st, xn, rows, start, cos, sin, gqa_native)
        xn = rmsnorm(h, L["ln2"], d["norm_eps"])
        gu = F.linear(xn, L["wgu"])
        mlp = d["mlp_dim"]
        h = h + F.linear(F.silu(gu[..., :mlp]) * gu[..., mlp:], L["wdown"])
    last = rmsnorm(h[:, -1], m["final_norm"], d["norm_eps"])
    return F.linear(last, m["lm_head"]).float()


def decode_step_legacy(d, m, cache, tok, pos, cos, sin, mask_base, gqa_native=True):
    """The static decode step as it was before issue 42, kept only to measure what made the bf16
    anchor slow (`--legacy-step`): SDPA with enable_gqa AND an additive mask, which by torch's
    dispatch rules no fused SDPA backend takes on CUDA (flash takes no mask, the efficient kernel no
    GQA, cuDNN's is off here), so it falls back to the math backend, which upcasts bf16 q/K/V to
    fp32 and expands K/V to every q head on every layer of every step; and q and k roped
    separately, with a cast in and out for each. tools/torch_anchors.py profiles both steps."""
    B = tok.shape[0]
    nq, nkv, hd = d["nq"], d["nkv"], d["head_dim"]
    h = F.embedding(tok, m["embed"])
    c, s_ = cos.index_select(0, pos), sin.index_select(0, pos)  # [1, hd/2]
    mask = torch.where(mask_base <= pos, 0.0, float("-inf")).to(h.dtype).view(1, 1, 1, -1)
    for L, st in zip(m["layers"], cache.layers):
        xn = rmsnorm(h, L["ln1"], d["norm_eps"])
        qkv = F.linear(xn, L["wqkv"])
        q = qkv[..., :nq * hd].view(B, 1, nq, hd).transpose(1, 2)
        k = qkv[..., nq * hd:(nq + nkv) * hd].view(B, 1, nkv, hd).transpose(1, 2)
        v = qkv[..., (nq + nkv) * hd:].view(B, 1, nkv, hd).transpose(1, 2)
        q, k = apply_rope(q, c, s_), apply_rope(k, c, s_)
        st["k"].index_copy_(2, pos, k)
        st["v"].index_copy_(2, pos, v)
        if gqa_native:
            o = F.scaled_dot_product_attention(q, st["k"], st["v"], attn_mask=mask, enable_gqa=True)
        else:
            g = nq // nkv
            o = F.scaled_dot_product_attention(q, st["k"].repeat_interleave(g, 1), st["v"].repeat_interleave(g, 1),
                                               attn_mask=mask)
        h = h + F.linear(o.transpose(1, 2).reshape(B, 1, nq * hd), L["wo"])
        xn = rmsnorm(h, L["ln2"], d["norm_eps"])
        gu = F.linear(xn, L["wgu"])
        mlp = d["mlp_dim"]
        h = h + F.linear(F.silu(gu[..., :mlp]) * gu[..., mlp:], L["wdown"])
    last = rmsnorm(h[:, -1], m["final_norm"], d["norm_eps"])
    return F.linear(last, m["lm_head"]).float().argmax(-1).view(B, 1)


ATTN_MODES = ("grouped", "gqa", "repeat")


def rope_tables_rotate(cos, sin):
    """[P, hd/2] cos/sin -> [P, hd] tables C = [cos, cos], S = [-sin, sin] for the rotate-half form
    x * C + [x1, x0] * S, which forms apply_rope's products and sums bit for bit (x0*c + x1*(-s) is
    x0*c - x1*s; x1*c + x0*s is x0*s + x1*c) in three kernels for q and k together instead of eight each."""
    return torch.cat([cos, cos], -1).contiguous(), torch.cat([-sin, sin], -1).contiguous()


def decode_step_static(d, m, cache, tok, pos, cosf, sinf, mask_base, attn="grouped"):
    """One decode step of the dense preset with fixed shapes, capturable in a CUDA graph (the
    static-KV-cache decode other engines capture): tok [B, 1], pos a 1-element int64 device tensor
    (the position being written, the same for every row), cosf/sinf from rope_tables_rotate. K/V
    (in the model's dtype: bf16 for bf16) are written at `pos` by index_copy_, and attention runs
    over the whole cache with positions after `pos` masked. Returns the argmax [B, 1] and advances
    nothing (the caller's graph does).

    attn: how SDPA does GQA with the mask (issue 42):
      grouped  the g q heads that share a kv head are g query rows of that kv head, q [B, nkv, g, hd]
               against K/V [B, nkv, L, hd]: no K/V expansion, and the efficient (cutlass) kernel takes
               the mask, in bf16 and fp32 (the default, the fair anchor);
      gqa      enable_gqa=True with the mask: no fused kernel takes that pair on CUDA (torch's
               sdp_utils), so it falls back to the math backend (bf16 upcast to fp32, K/V
               expanded): the slow anchor of issue 42;
      repeat   K/V expanded by repeat_interleave on every layer, then the efficient kernel (what
               transformers does when a mask is present)."""
    B = tok.shape[0]
    nq, nkv, hd = d["nq"], d["nkv"], d["head_dim"]
    g, half = nq // nkv, hd // 2
    h = F.embedding(tok, m["embed"])  # [B, 1, dm]
    dtype = h.dtype
    c, s_ = cosf.index_select(0, pos), sinf.index_select(0, pos)  # [1, hd], fp32
    # 0 where position <= pos, -inf after: [1, 1, 1, max_len], in the model's dtype
    mask = torch.where(mask_base <= pos, 0.0, float("-inf")).to(dtype).view(1, 1, 1, -1)
    for L, st in zip(m["layers"], cache.layers):
        xn = rmsnorm(h, L["ln1"], d["norm_eps"])
        qkv = F.linear(xn, L["wqkv"]).view(B, nq + 2 * nkv, hd)
        x = qkv[:, :nq + nkv].float()  # q and k heads, roped together in fp32 like apply_rope
        r = (x * c + torch.cat([x[..., half:], x[..., :half]], -1) * s_).to(dtype)  # [B, nq + nkv, hd]
        st["k"].index_copy_(2, pos, r[:, nq:].unsqueeze(2))
        st["v"].index_copy_(2, pos, qkv[:, nq + nkv:].unsqueeze(2))
        if attn == "grouped":
            o = F.scaled_dot_product_attention(r[:, :nq].view(B, nkv, g, hd), st["k"], st["v"], attn_mask=mask)
        elif attn == "gqa":
            o = F.scaled_dot_product_attention(r[:, :nq].unsqueeze(2), st["k"], st["v"], attn_mask=mask,
                                               enable_gqa=True)
        elif attn == "repeat":
            o = F.scaled_dot_product_attention(r[:, :nq].unsqueeze(2), st["k"].repeat_interleave(g, 1),
                                               st["v"].repeat_interleave(g, 1), attn_mask=mask)
        else:
            raise ValueError("attn %s (%s)" % (attn, ", ".join(ATTN_MODES)))
        h = h + F.linear(o.reshape(B, 1, nq * hd), L["wo"])  # o [B, nkv, g, hd] or [B, nq, 1, hd]: head order
        xn = rmsnorm(h, L["ln2"], d["norm_eps"])
        gu = F.linear(xn, L["wgu"])
        mlp = d["mlp_dim"]
        h = h + F.linear(F.silu(gu[..., :mlp]) * gu[..., mlp:], L["wdown"])
    last = rmsnorm(h[:, -1], m["final_norm"], d["norm_eps"])
    return F.linear(last, m["lm_head"]).float().argmax(-1).view(B, 1)


def graph_cache_len(n):
    """Static cache length for the graph decode: a multiple of 64, so that the mask's rows are
    aligned for the efficient SDPA kernel (otherwise it pads a copy of the mask on every call)."""
    return (n + 63) // 64 * 64


def graph_decode(d, m, cache, first_tok, start, steps, cos, sin, device, attn="grouped", legacy=False, repeats=3):
    """Decode `steps` tokens from position `start` by replaying one captured step (tok and pos
    updated inside the graph), `repeats` times from the same start (each round rewrites the same
    cache positions). Returns (wall seconds, device ms) of the median round by device time, and the
    tokens of one more, untimed round ([steps, B])."""
    max_len = cache.layers[0]["k"].shape[2]
    mask_base = torch.arange(max_len, device=device)
    if legacy:
        step = lambda t, p: decode_step_legacy(d, m, cache, t, p, cos, sin, mask_base, attn != "repeat")
    else:
        cosf, sinf = rope_tables_rotate(cos, sin)
        step = lambda t, p: decode_step_static(d, m, cache, t, p, cosf, sinf, mask_base, attn)
    tok = first_tok.clone()
    pos = torch.tensor([start], dtype=torch.long, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph (allocator, kernels' first launch)
        for _ in range(2):
            step(tok, pos)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nxt = step(tok, pos)
        tok.copy_(nxt)
        pos.add_(1)
    rounds = []
    for _ in range(max(1, repeats)):
        pos.fill_(start)  # the capture itself ran nothing; the warm-up wrote K/V at `start` only
        tok.copy_(first_tok)
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        e0.record()
        for _ in range(steps):
            graph.replay()
        e1.record()
        torch.cuda.synchronize()
        rounds.append((e0.elapsed_time(e1), time.perf_counter() - t0))
    rounds.sort()
    dev_ms, wall_s = rounds[len(rounds) // 2]
    pos.fill_(start)
    tok.copy_(first_tok)
    out = []
    for _ in range(steps):
        graph.replay()
        out.append(tok.clone())
    torch.cuda.synchronize()
    return wall_s, dev_ms, torch.cat(out, 1).t().contiguous()


# ---------------------------------------------------------------- bench


def gqa_supported(device):
    try:
        q = torch.zeros(1, 4, 2, 8, device=device)
        kv = torch.zeros(1, 2, 2, 8, device=device)
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return True
    except (TypeError, RuntimeError):
        return False


def prompt_tokens(r, n, vocab):
    return [(r * 131 + i * 7 + 1) % vocab for i in range(n)]


def attn_mode(args, gqa):
    """--attn, with --repeat-kv as its old spelling; enable_gqa falls back to repeat where SDPA lacks it."""
    attn = "repeat" if getattr(args, "repeat_kv", False) else getattr(args, "attn", "grouped")
    return "repeat" if attn == "gqa" and not gqa else attn


def impl_name(args, gqa):
    if not args.cuda_graph:
        return "torch_reference"
    return "torch_reference_cuda_graph" + ("_legacy" if getattr(args, "legacy_step", False) else "") + \
        ("" if attn_mode(args, gqa) == "grouped" else "_" + attn_mode(args, gqa))


def run_batch(d, m, args, batch, device, dtype, cos, sin, gqa):
    max_len = args.prompt_tokens + args.decode_steps + 1
    if args.cuda_graph:
        max_len = graph_cache_len(max_len)
    dec_tokens = None
    ev = lambda: torch.cuda.Event(enable_timing=True)
    with torch.inference_mode():
        # warm-up: one prefill and two decode-shaped steps on a scratch cache
        wc = Cache(d, batch, max_len, device, dtype)
        for r in range(batch):
            t = torch.tensor([prompt_tokens(r, args.prompt_tokens, d["vocab"])], device=device)
            forward(d, m, wc, t, torch.tensor([r], device=device), 0, cos, sin, gqa)
        all_rows = torch.arange(batch, device=device)
        tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        for s in range(2):
            forward(d, m, wc, tok, all_rows, args.prompt_tokens + s, cos, sin, gqa)
        del wc
        torch.cuda.synchronize()

        cache = Cache(d, batch, max_len, device, dtype)
        prompts = [torch.tensor([prompt_tokens(r, args.prompt_tokens, d["vocab"])], device=device)
                   for r in range(batch)]
        rows = [torch.tensor([r], device=device) for r in range(batch)]
        # prefill: one request of `prompt` tokens per step, like ordo's max_batch_tokens = 512
        last = []
        e0, e1 = ev(), ev()
        t0 = time.perf_counter()
        e0.record()
        for r in range(batch):
            last.append(forward(d, m, cache, prompts[r], rows[r], 0, cos, sin, gqa).argmax(-1))
        e1.record()
        torch.cuda.synchronize()
        pre_s, pre_dev = time.perf_counter() - t0, e0.elapsed_time(e1)
        tok = torch.cat(last).view(batch, 1)
        if args.cuda_graph:
            # decode: the whole step captured once and replayed, static KV cache
            dec_s, dec_dev, dec_tokens = graph_decode(d, m, cache, tok, args.prompt_tokens, args.decode_steps, cos, sin,
                                                      device, attn_mode(args, gqa), getattr(args, "legacy_step", False),
                                                      getattr(args, "repeats", 3))
        else:
            # decode: one token per request per step, greedy (argmax) feeding the next step
            e0, e1 = ev(), ev()
            t0 = time.perf_counter()
            e0.record()
            for s in range(args.decode_steps):
                tok = forward(d, m, cache, tok, all_rows, args.prompt_tokens + s, cos, sin, gqa).argmax(-1).view(batch, 1)
            e1.record()
            torch.cuda.synchronize()
            dec_s, dec_dev = time.perf_counter() - t0, e0.elapsed_time(e1)

    def phase(tokens, steps, secs, dev_ms):
        return {"tokens": tokens, "steps": steps, "seconds": secs, "tokens_per_s": tokens / secs if secs > 0 else 0.0,
                "ms_per_step": secs * 1e3 / steps if steps else 0.0, "device_ms_sum": dev_ms}

    dec = phase(batch * args.decode_steps, args.decode_steps, dec_s, dec_dev)
    dec["device_ms_per_step"] = dec_dev / args.decode_steps if args.decode_steps else 0.0
    if dec_tokens is not None:
        dec["first_row_tokens"] = dec_tokens[0].tolist()
    return phase(batch * args.prompt_tokens, batch, pre_s, pre_dev), dec


def bench(args):
    device = "cuda"
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    # cuDNN's SDPA backend (preferred for bf16 on Hopper) builds a graph per new KV length, i.e. on
    # every decode step; suspected cause of 46 ms bf16 decode steps (vs 8 ms fp32) in the first run.
    if not args.cudnn_sdp and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)
    d = dims_of(args.preset, args.size)
    t0 = time.perf_counter()
    m = build_model(d, args.seed, device, dtype)
    cos, sin = rope_table(d, args.prompt_tokens + args.decode_steps + 4, device)
    torch.cuda.synchronize()
    build_s = time.perf_counter() - t0
    gqa = gqa_supported(device)
    name = torch.cuda.get_device_name()
    print("torch_reference forward: %s/%s %s on %s (torch %s, sdpa gqa %s, tf32 %s, cudnn sdp %s, %s) | prompt %d tokens, "
          "decode %d steps | model built in %.1f s" % (args.preset, args.size, args.dtype, name, torch.__version__, gqa,
                                                      args.tf32, args.cudnn_sdp, impl_name(args, gqa), args.prompt_tokens,
                                                      args.decode_steps, build_s))
    print("%5s %-8s %8s %6s %11s %12s %10s" % ("batch", "phase", "tokens", "steps", "wall ms", "tokens/s", "ms/step"))
    for batch in args.batch:
        pre, dec = run_batch(d, m, args, batch, device, dtype, cos, sin, gqa)
        for nm, p in (("prefill", pre), ("decode", dec)):
            print("%5d %-8s %8d %6d %11.1f %12.1f %10.2f" % (batch, nm, p["tokens"], p["steps"], p["seconds"] * 1e3,
                                                              p["tokens_per_s"], p["ms_per_step"]))
        j = {"bench": "forward", "preset": args.preset, "size": args.size,
             "kv_dtype": args.dtype, "device": "torch %s %s" % (torch.__version__, name),
             "prompt_tokens": args.prompt_tokens, "decode_steps": args.decode_steps, "batch": batch,
             "max_batch_tokens": args.prompt_tokens, "block_size": 0, "model_build_s": build_s,
             "prefill": pre, "decode": dec, "dtype": args.dtype,
             "impl": impl_name(args, gqa)}
        print("BENCH_JSON " + json.dumps(j), flush=True)


def check_logits(args):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    d = dims_of(args.preset, "tiny")
    m = build_model(d, 0, device, torch.float32)
    tokens = [1, 2, 3, 4, 5, 6, 7, 8, 100, 200, 257, 0]
    cos, sin = rope_table(d, len(tokens) + 1, device)
    cache = Cache(d, 1, len(tokens), device, torch.float32)
    with torch.inference_mode():
        logits = forward(d, m, cache, torch.tensor([tokens], device=device), torch.tensor([0], device=device), 0,
                         cos, sin, gqa_supported(device))
    print("check-logits %s/tiny seed 0 tokens %s on %s" % (args.preset, tokens, device))
    print("first weights: embed[0,:4] %s lm_head[0,:4] %s" % (m["embed"][0, :4].tolist(), m["lm_head"][0, :4].tolist()))
    print("logits[last, :8] " + " ".join("%.6f" % x for x in logits[0, :8].tolist()))


def check_graph(args):
    """The captured decode must produce the eager decode's tokens (tiny dense, fp32, batch 2), for
    every SDPA GQA mode of the static step, with an aligned and an unaligned cache length, and for
    the legacy step."""
    device = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)
    d = dims_of("dense", "tiny")
    m = build_model(d, 0, device, torch.float32)
    P, steps, B = 40, 12, 2
    cos, sin = rope_table(d, P + steps + 4, device)
    gqa = gqa_supported(device)
    variants = [(a, False, n) for a in ATTN_MODES for n in (P + steps + 1, graph_cache_len(P + steps + 1))]
    variants.append(("gqa" if gqa else "repeat", True, P + steps + 1))
    failed = 0
    with torch.inference_mode():
        eager = Cache(d, B, P + steps + 1, device, torch.float32)
        firsts = []
        for r in range(B):
            t = torch.tensor([prompt_tokens(r, P, d["vocab"])], device=device)
            firsts.append(forward(d, m, eager, t, torch.tensor([r], device=device), 0, cos, sin, gqa).argmax(-1))
        tok = torch.cat(firsts).view(B, 1)
        want = []
        t = tok
        for s in range(steps):
            t = forward(d, m, eager, t, torch.arange(B, device=device), P + s, cos, sin, gqa).argmax(-1).view(B, 1)
            want.append(t)
        want = torch.cat(want, 1)  # [B, steps]
        for attn, legacy, cache_len in variants:
            graphed = Cache(d, B, cache_len, device, torch.float32)
            for r in range(B):
                t = torch.tensor([prompt_tokens(r, P, d["vocab"])], device=device)
                forward(d, m, graphed, t, torch.tensor([r], device=device), 0, cos, sin, gqa)
            _, _, got = graph_decode(d, m, graphed, tok, P, steps, cos, sin, device, attn, legacy, repeats=1)
            same = torch.equal(want, got)
            failed += not same
            print("check-graph dense/tiny %s%s, cache %d: %d steps x %d rows, graph tokens %s eager tokens: %s" %
                  ("legacy " if legacy else "", attn, cache_len, steps, B, "==" if same else "!=",
                   "PASS" if same else "FAIL"))
    if failed:
        raise SystemExit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="dense", choices=["dense", "gdn_hybrid"])
    p.add_argument("--size", default="1b", choices=["tiny", "1b"])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--tf32", action="store_true", help="allow TF32 matmuls in fp32 mode (off by default, like ordo)")
    p.add_argument("--cudnn-sdp", action="store_true", help="keep the cuDNN SDPA backend enabled (off by default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--decode-steps", type=int, default=16)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--check-logits", action="store_true")
    p.add_argument("--cuda-graph", action="store_true",
                   help="decode with a static KV cache and the whole step captured in one CUDA graph (dense only)")
    p.add_argument("--attn", default="grouped", choices=ATTN_MODES,
                   help="--cuda-graph: how SDPA does GQA under the decode mask (decode_step_static): grouped q rows "
                        "per kv head (default, the fair anchor), enable_gqa (math fallback, the pre-issue-42 anchor) "
                        "or K/V expanded by repeat_interleave")
    p.add_argument("--repeat-kv", action="store_true", help="the old spelling of --attn repeat")
    p.add_argument("--legacy-step", action="store_true",
                   help="--cuda-graph: the decode step as it was before issue 42 (to measure what was slow)")
    p.add_argument("--repeats", type=int, default=3,
                   help="--cuda-graph: time the decode this many times from the same start; report the median")
    p.add_argument("--check-graph", action="store_true",
                   help="tiny dense: the graph decode's tokens equal the eager decode's (then exit)")
    args = p.parse_args()
    if (args.cuda_graph or args.check_graph) and args.preset != "dense":
        raise SystemExit("--cuda-graph / --check-graph: the static decode step is written for the dense preset only")
    if args.check_graph:
        return check_graph(args)
    if args.check_logits:
        check_logits(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
