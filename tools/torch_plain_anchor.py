#!/usr/bin/env python3
"""A plain, independent PyTorch decoder with the geometry of ordo's dense 1b preset, written the
way a new user would write one, to check the speed of tools/torch_reference.py's CUDA-graph anchor
(issue 42). It shares no code with that script and does not build ordo's seeded weights: the
weights are nn.Linear's random initialisation and the prompt's K/V are random, since only the
time of a decode step is measured.

  python3 tools/torch_plain_anchor.py --dtype bf16 --batch 1 8 16            # prompt 512, decode 32
  python3 tools/torch_plain_anchor.py --dtype fp32 --batch 1 8 16 --gqa native

Each decode step: embedding, 16 pre-norm layers (RMSNorm computed in fp32, fused qkv projection,
rotate-half RoPE in the model dtype, K/V written into a static cache [B, kv heads, L, head dim] of
the model dtype by index_copy_ at the step's position, scaled_dot_product_attention under an
additive mask of the positions after it, output projection, fused gate-up projection, SiLU gate,
down projection), final norm, LM head, argmax; the whole step (and the position's advance) is
captured in one CUDA graph and replayed. GQA inside SDPA: `repeat` expands K/V to every q head
first (what transformers does when a mask is given), `native` passes enable_gqa=True. fp32 runs
without TF32. cuDNN's SDPA backend is off unless --cudnn-sdp (as in torch_reference.py).
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# ordo's dense 1b: runtime/model_presets.cpp dims_of(model_preset::dense, model_size::b1), vocab 258
DENSE_1B = dict(vocab=258, hidden=2048, intermediate=5632, layers=16, heads=16, kv_heads=4, head_dim=128,
                rope_theta=10000.0, eps=1e-6)


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, g, gqa):
        super().__init__()
        self.h, self.kv, self.hd, self.gqa = g["heads"], g["kv_heads"], g["head_dim"], gqa
        self.qkv = nn.Linear(g["hidden"], (self.h + 2 * self.kv) * self.hd, bias=False)
        self.o = nn.Linear(self.h * self.hd, g["hidden"], bias=False)

    def forward(self, x, cos, sin, k_cache, v_cache, pos, mask):
        b = x.shape[0]
        q, k, v = self.qkv(x).view(b, 1, self.h + 2 * self.kv, self.hd).transpose(1, 2).split(
            [self.h, self.kv, self.kv], dim=1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        if self.gqa == "native":
            o = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask, enable_gqa=True)
        else:
            n = self.h // self.kv
            kk = k_cache[:, :, None].expand(b, self.kv, n, *k_cache.shape[2:]).reshape(b, self.h, *k_cache.shape[2:])
            vv = v_cache[:, :, None].expand(b, self.kv, n, *v_cache.shape[2:]).reshape(b, self.h, *v_cache.shape[2:])
            o = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        return self.o(o.transpose(1, 2).reshape(b, 1, self.h * self.hd))


class MLP(nn.Module):
    def __init__(self, g):
        super().__init__()
        self.gate_up = nn.Linear(g["hidden"], 2 * g["intermediate"], bias=False)
        self.down = nn.Linear(g["intermediate"], g["hidden"], bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Layer(nn.Module):
    def __init__(self, g, gqa):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(g["hidden"], g["eps"]), RMSNorm(g["hidden"], g["eps"])
        self.attn, self.mlp = Attention(g, gqa), MLP(g)

    def forward(self, h, cos, sin, k_cache, v_cache, pos, mask):
        h = h + self.attn(self.norm1(h), cos, sin, k_cache, v_cache, pos, mask)
        return h + self.mlp(self.norm2(h))


class Decoder(nn.Module):
    def __init__(self, g, gqa):
        super().__init__()
        self.g = g
        self.embed = nn.Embedding(g["vocab"], g["hidden"])
        self.layers = nn.ModuleList(Layer(g, gqa) for _ in range(g["layers"]))
        self.norm = RMSNorm(g["hidden"], g["eps"])
        self.lm_head = nn.Linear(g["hidden"], g["vocab"], bias=False)

    def step(self, tok, pos, cache, cos_t, sin_t, positions):
        """tok [B, 1], pos [1] (int64, on the device): writes K/V at pos, returns the argmax [B, 1]."""
        h = self.embed(tok)
        cos, sin = cos_t.index_select(0, pos), sin_t.index_select(0, pos)  # [1, head_dim]
        mask = torch.zeros(positions.shape, dtype=h.dtype, device=h.device).masked_fill(positions > pos, float("-inf"))
        for layer, (kc, vc) in zip(self.layers, cache):
            h = layer(h, cos, sin, kc, vc, pos, mask)
        return self.lm_head(self.norm(h)).argmax(-1)


def rope(g, n, dtype, device):
    inv = 1.0 / (g["rope_theta"] ** (torch.arange(0, g["head_dim"], 2, device=device).float() / g["head_dim"]))
    f = torch.outer(torch.arange(n, device=device).float(), inv)
    e = torch.cat((f, f), dim=-1)
    return e.cos().to(dtype), e.sin().to(dtype)


def build(dtype, gqa, device="cuda", g=DENSE_1B):
    torch.manual_seed(0)
    with torch.device(device):
        model = Decoder(g, gqa)
    return model.to(dtype).eval()


def weight_bytes(model):
    """Bytes a decode step streams: every parameter but the embedding table (B rows of it are read)."""
    return sum(p.numel() * p.element_size() for n, p in model.named_parameters() if not n.startswith("embed"))


def decode_ms(model, batch, prompt=512, steps=32, repeats=3, device="cuda"):
    """ms per decode step (device time, median of `repeats` rounds of `steps` graph replays from
    position `prompt`) for `batch` rows whose first `prompt` cache positions hold random K/V."""
    g, dtype = model.g, model.embed.weight.dtype
    length = (prompt + steps + 1 + 63) // 64 * 64
    gen = torch.Generator(device=device).manual_seed(batch)
    cache = [tuple(torch.randn(batch, g["kv_heads"], length, g["head_dim"], device=device, dtype=dtype, generator=gen)
                   for _ in range(2)) for _ in range(g["layers"])]
    cos_t, sin_t = rope(g, length, dtype, device)
    positions = torch.arange(length, device=device).view(1, 1, 1, length)
    first = torch.randint(0, g["vocab"], (batch, 1), device=device, generator=gen)
    tok, pos = first.clone(), torch.tensor([prompt], device=device)
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model.step(tok, pos, cache, cos_t, sin_t, positions)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            tok.copy_(model.step(tok, pos, cache, cos_t, sin_t, positions))
            pos.add_(1)
        times = []
        for _ in range(repeats):
            pos.fill_(prompt)
            tok.copy_(first)
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(steps):
                graph.replay()
            e1.record()
            torch.cuda.synchronize()
            times.append(e0.elapsed_time(e1) / steps)
        del graph
    return sorted(times)[len(times) // 2]


def setup(cudnn_sdp=False):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if not cudnn_sdp and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--gqa", default="repeat", choices=["repeat", "native"])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8, 16])
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--decode-steps", type=int, default=32)
    p.add_argument("--cudnn-sdp", action="store_true")
    a = p.parse_args()
    setup(a.cudnn_sdp)
    model = build(torch.bfloat16 if a.dtype == "bf16" else torch.float32, a.gqa)
    name = torch.cuda.get_device_name()
    print("torch_plain_anchor: dense 1b geometry, %s, gqa %s, on %s (torch %s), weights streamed per step %.3f GB" %
          (a.dtype, a.gqa, name, torch.__version__, weight_bytes(model) / 1e9))
    res = {}
    for b in a.batch:
        res[b] = decode_ms(model, b, a.prompt_tokens, a.decode_steps)
        print("batch %3d  decode %.3f ms/step" % (b, res[b]), flush=True)
    print("PLAIN_JSON " + json.dumps({"impl": "torch_plain_anchor", "dtype": a.dtype, "gqa": a.gqa, "device": name,
                                      "torch": torch.__version__, "prompt_tokens": a.prompt_tokens,
                                      "decode_steps": a.decode_steps, "decode_ms_per_step": res}))


if __name__ == "__main__":
    main()
