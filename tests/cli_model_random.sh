#!/usr/bin/env bash
# `ordo model random`: a random checkpoint with a config's dims, cut to --layers; the same seed writes
# the same bytes; a bad config or too many layers exits 2 naming the file and the key.
set -u
ordo=${1:?usage: cli_model_random.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ordo" model random --like tests/data/hf/qwen3_5_vl_sharded/config.json --out "$tmp/a" --layers 3 --seed 5 >"$tmp/a.out" 2>&1
check "writes a checkpoint and says what" grep -q "^wrote $tmp/a: .* bytes of model.safetensors, family qwen3_5 (.*layers=LLF " "$tmp/a.out"
check "config.json cut inside text_config" python3 -c "
import json,sys; c=json.load(open('$tmp/a/config.json'))['text_config']
sys.exit(0 if c['num_hidden_layers']==3 and len(c['layer_types'])==3 else 1)"
"$ordo" model random --like tests/data/hf/qwen3_5_vl_sharded/config.json --out "$tmp/b" --layers 3 --seed 5 >/dev/null 2>&1
check "same seed, same bytes" cmp -s "$tmp/a/model.safetensors" "$tmp/b/model.safetensors"

"$ordo" model random --like tests/data/hf/qwen3_5_text/config.json --out "$tmp/c" --layers 9 >"$tmp/c.out" 2>&1
code=$?
check "too many layers exits 2" test "$code" -eq 2
check "too many layers is named" grep -q "num_hidden_layers 4 has fewer than the 9 layers asked for" "$tmp/c.out"
printf '{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}' >"$tmp/llama.json"
"$ordo" model random --like "$tmp/llama.json" --out "$tmp/d" >"$tmp/d.out" 2>&1
code=$?
check "unknown architecture exits 2" test "$code" -eq 2
check "unknown architecture is named" grep -q 'architecture "LlamaForCausalLM" (model_type "llama") is not a family ordo loads' "$tmp/d.out"
finish
