#!/usr/bin/env python3
"""Writes the tiny Hugging Face checkpoints of tests/data/hf/ and transformers' fp32 logits for them.

Runs where torch and transformers are (the GPU machine: transformers 5.17, torch 2.11, tokenizers 0.23),
on its CPU, with HF's pure-PyTorch GDN paths. CI never runs it: it compares against what this wrote.

    python3 tools/hf_fixtures.py OUT_DIR [--sources]

Each fixture directory holds what `save_pretrained` wrote (config.json, model.safetensors or shards with
model.safetensors.index.json, generation_config.json), a small tokenizer.json trained here, and:
  ordo_expected.json  versions, dims, the prompts (token ids), per-prompt offsets into the logits
  ordo_logits.bin     float32 little-endian logits, [sum of prompt lengths, vocab], prompt after prompt

The oracle is the checkpoint as saved, reloaded with dtype=torch.float32 (bf16 weights upcast exactly),
eager attention, one full forward per prompt.

Dimensions are chosen so mix-ups show: GDN key heads != value heads, key dim != value dim, partial rotary
< 1, bf16 weights with fp32 A_log, >= 2 GDN and >= 1 attention layers, one sharded variant, one config
without layer_types (and with the pre-v5 top-level rope keys).
"""
import json
import math
import os
import shutil
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import tokenizers
import torch
import transformers

VOCAB = 384
PROMPT_LENGTHS = [1, 63, 64, 65, 300]
MIN_TOP2_GAP = 3e-3  # a seed is kept only if every position's argmax is this clear (2x the tolerance + margin)

GDN = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
           linear_value_head_dim=12, linear_conv_kernel_dim=4)


def text_dims(**over):
    d = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
             num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
             max_position_embeddings=4096, tie_word_embeddings=False, hidden_act="silu",
             bos_token_id=None, eos_token_id=VOCAB - 1, pad_token_id=None,
             layer_types=["linear_attention"] * 3 + ["full_attention"],
             rope_parameters={"rope_type": "default", "rope_theta": 50000.0, "partial_rotary_factor": 0.25},
             **GDN)
    d.update(over)
    return d


def randomize(model, seed):
    """Weights of O(1) effect, so mutations and misreadings move the logits far beyond the tolerance."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            def normal(std):
                return torch.randn(p.shape, generator=g) * std

            def uniform(lo, hi):
                return torch.rand(p.shape, generator=g) * (hi - lo) + lo

            if name.endswith("A_log"):
                v = uniform(-2.0, 1.0)
            elif name.endswith("dt_bias"):
                v = uniform(-1.0, 1.0)
            elif name.endswith("linear_attn.norm.weight"):
                v = uniform(0.5, 1.5)  # plain w
            elif p.dim() == 1:
                v = uniform(-0.5, 0.5)  # zero-centred norms: y = x^ (1 + w); biases (vision) too
            elif "conv1d" in name:
                v = normal(0.5)
            elif "embed_tokens" in name:
                v = normal(1.0)
            elif name.endswith("lm_head.weight"):
                v = normal(4.0 / math.sqrt(p.shape[1]))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                v = normal(1.0 / math.sqrt(max(fan_in, 1)))
            p.copy_(v.to(p.dtype))


def to_bf16_keep_a_log_fp32(model, seed):
    """bf16 weights; A_log stays fp32 with values no bf16 can hold (so an A_log read as bf16 shows)."""
    g = torch.Generator().manual_seed(seed + 7919)
    model.to(torch.bfloat16)
    for name, mod in model.named_modules():
        if hasattr(mod, "A_log") and isinstance(mod.A_log, torch.nn.Parameter):
            v = torch.rand(mod.A_log.shape, generator=g, dtype=torch.float32) * 3.0 - 2.0
            mod.A_log = torch.nn.Parameter(v)


def train_tokenizer(vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    src = os.path.dirname(transformers.__file__)
    lines = []
    for f in sorted(os.listdir(os.path.join(src, "models", "qwen3_next"))):
        if f.endswith(".py"):
            with open(os.path.join(src, "models", "qwen3_next", f), encoding="utf-8") as fh:
                lines += fh.read().splitlines()
    tok.train_from_iterator(lines, trainer)
    return tok


def save_tokenizer(tok, d):
    try:
        from transformers import PreTrainedTokenizerFast
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
        fast.save_pretrained(d)
    except Exception as e:  # the tokenizer is for part 1b; the fixture stands without tokenizer_config.json
        print("tokenizer_config.json not written:", e, flush=True)
        tok.save(os.path.join(d, "tokenizer.json"))


def prompts_for(seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB - 3, size=n).tolist() for n in PROMPT_LENGTHS]


def oracle_logits(cls, d, prompts):
    m, info = cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise RuntimeError(f"{d}: the checkpoint does not reload as saved: {bad}")
    m.eval()
    rows = []
    with torch.no_grad():
        for p in prompts:
            out = m(input_ids=torch.tensor([p], dtype=torch.long), use_cache=False)
            rows.append(out.logits[0].float().numpy())
    return m, np.concatenate(rows, axis=0)


def top2_gap(logits):
    s = np.sort(logits, axis=1)
    return float((s[:, -1] - s[:, -2]).min())


def tensor_dtypes(d):
    from safetensors import safe_open
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "pt") as fh:
                for k in fh.keys():
                    out[k] = [f, str(fh.get_slice(k).get_dtype()), list(fh.get_slice(k).get_shape())]
    return out


def edit_config(d, fn):
    path = os.path.join(d, "config.json")
    with open(path) as fh:
        cfg = json.load(fh)
    fn(cfg)
    with open(path, "w") as fh:
        json.dump(cfg, fh, indent=2, sort_keys=True)
        fh.write("\n")


def build(name, out_root, make_model, reload_cls, config_edit=None, shard=None, seeds=range(1, 80), tok=None):
    d = os.path.join(out_root, name)
    for seed in seeds:
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        torch.manual_seed(seed)
        model = make_model()
        randomize(model, seed)
        to_bf16_keep_a_log_fp32(model, seed)
        kw = {"max_shard_size": shard} if shard else {}
        model.save_pretrained(d, **kw)
        if config_edit:
            edit_config(d, config_edit)
        save_tokenizer(tok, d)
        prompts = prompts_for(seed)
        reloaded, logits = oracle_logits(reload_cls, d, prompts)
        gap = top2_gap(logits)
        print(f"{name}: seed {seed} min top-2 gap {gap:.3g} max |logit| {np.abs(logits).max():.3g}", flush=True)
        if gap >= MIN_TOP2_GAP:
            break
    else:
        raise SystemExit(f"{name}: no seed gave a top-2 gap of {MIN_TOP2_GAP}")
    offsets = np.cumsum([0] + [len(p) for p in prompts]).tolist()
    logits.astype("<f4").tofile(os.path.join(d, "ordo_logits.bin"))
    cfg = reloaded.config
    text_cfg = getattr(cfg, "text_config", None) or cfg
    meta = {
        "generator": "tools/hf_fixtures.py",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "tokenizers": tokenizers.__version__, "numpy": np.__version__},
        "oracle": "from_pretrained(dtype=torch.float32, attn_implementation='eager'), one full forward per prompt, CPU",
        "class": type(reloaded).__name__,
        "seed": seed,
        "vocab_size": VOCAB,
        "layer_types_as_loaded": list(text_cfg.layer_types),
        "partial_rotary_factor_as_loaded": (text_cfg.rope_parameters or {}).get("partial_rotary_factor")
        if hasattr(text_cfg, "rope_parameters") else getattr(text_cfg, "partial_rotary_factor", None),
        "rope_theta_as_loaded": (text_cfg.rope_parameters or {}).get("rope_theta")
        if hasattr(text_cfg, "rope_parameters") else getattr(text_cfg, "rope_theta", None),
        "min_top2_gap": gap,
        "max_abs_logit": float(np.abs(logits).max()),
        "prompts": prompts,
        "offsets": offsets,
        "logits": {"file": "ordo_logits.bin", "dtype": "float32-le", "shape": [offsets[-1], VOCAB]},
        "tensors": tensor_dtypes(d),
    }
    with open(os.path.join(d, "ordo_expected.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    # HF's own prefill-vs-incremental spread, for the record (the tolerance is 1e-3).
    p = prompts[-1]
    with torch.no_grad():
        full = reloaded(input_ids=torch.tensor([p]), use_cache=False).logits[0]
        out = reloaded(input_ids=torch.tensor([p[:100]]), use_cache=True)
        cache, steps = out.past_key_values, [out.logits[0]]
        for t in p[100:]:
            out = reloaded(input_ids=torch.tensor([[t]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            steps.append(out.logits[0])
        inc = torch.cat(steps, 0)
    print(f"{name}: config as loaded: {cfg.to_json_string()}", flush=True)
    print(f"{name}: HF full vs prefill(100)+decode max |dlogit| {float((full - inc).abs().max()):.3g}", flush=True)
    return d


def main():
    out_root = sys.argv[1]
    os.makedirs(out_root, exist_ok=True)
    torch.set_num_threads(min(16, os.cpu_count() or 1))
    print("transformers", transformers.__version__, "torch", torch.__version__, "tokenizers", tokenizers.__version__)
    tok = train_tokenizer(VOCAB)
    from transformers import (Qwen3_5Config, Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration,
                              Qwen3_5TextConfig, Qwen3NextConfig, Qwen3NextForCausalLM)
    failures = []

    # 1. qwen3_5_text: Qwen3_5ForCausalLM, layer_types explicit, v5 rope_parameters, one file.
    def text_model():
        return Qwen3_5ForCausalLM(Qwen3_5TextConfig(**text_dims()))

    # 2. qwen3_5: the multimodal wrapper (text under text_config, model.language_model., a tiny vision
    #    tower that ordo skips), head_dim 256, sharded.
    def vl_model():
        vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, in_channels=3, patch_size=4,
                      temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=64, num_position_embeddings=16,
                      deepstack_visual_indexes=[])
        text = text_dims(num_attention_heads=2, num_key_value_heads=1, head_dim=256, num_hidden_layers=5,
                         layer_types=["linear_attention", "linear_attention", "full_attention",
                                      "linear_attention", "full_attention"])
        return Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=text, vision_config=vision))

    # 3. qwen3_next, num_experts 0: interleaved in_proj_qkvz / in_proj_ba; config.json without layer_types
    #    but full_attention_interval 3 (layers 2 and 5 full of 6) and with the pre-v5 top-level rope keys.
    def next_model():
        d = text_dims(num_experts=0, full_attention_interval=3, num_hidden_layers=6)
        d.pop("layer_types")
        return Qwen3NextForCausalLM(Qwen3NextConfig(**d))

    def next_edit(cfg):
        assert cfg.pop("layer_types") == ["linear_attention", "linear_attention", "full_attention"] * 2
        cfg["full_attention_interval"] = 3
        rp = cfg.pop("rope_parameters", None) or {}
        cfg["rope_theta"] = rp.get("rope_theta", 50000.0)
        cfg["partial_rotary_factor"] = rp.get("partial_rotary_factor", 0.25)

    jobs = [("qwen3_5_text", text_model, Qwen3_5ForCausalLM, None, None),
            ("qwen3_5_vl_sharded", vl_model, Qwen3_5ForConditionalGeneration, None, "200KB"),
            ("qwen3_next_dense", next_model, Qwen3NextForCausalLM, next_edit, None)]
    for name, make, cls, edit, shard in jobs:
        try:
            build(name, out_root, make, cls, config_edit=edit, shard=shard, tok=tok)
        except Exception as e:  # report and go on: one call should bring back every fixture it can
            import traceback
            traceback.print_exc()
            failures.append(name)
    if "--sources" in sys.argv:
        src = os.path.dirname(transformers.__file__)
        dst = os.path.join(out_root, "hf_src")
        os.makedirs(dst, exist_ok=True)
        for fam in ("qwen3_5", "qwen3_next"):
            for f in os.listdir(os.path.join(src, "models", fam)):
                if f.endswith(".py"):
                    shutil.copy(os.path.join(src, "models", fam, f), os.path.join(dst, fam + "__" + f))
    if failures:
        raise SystemExit("failed: " + ", ".join(failures))


if __name__ == "__main__":
    main()
