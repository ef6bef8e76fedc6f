#!/usr/bin/env bash
# `ordo node` with model.path: a malformed checkpoint stops the node before it serves (exit 2, the file
# and the fault on stderr, nothing on stdout); a good one is served over HTTP.
set -u
ordo=${1:?usage: cli_model_path.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
use_tmp_and_pids

node() { # NAME DIR: runs a node on DIR's checkpoint; sets code, leaves NAME.out and NAME.err
  printf '[model]\npath = "%s"\n' "$2" >"$tmp/$1.toml"
  timeout 30 "$ordo" node --config "$tmp/$1.toml" --port 0 >"$tmp/$1.out" 2>"$tmp/$1.err"
  code=$?
}

cp -r tests/data/hf/qwen3_5_text "$tmp/truncated"
truncate -s -100 "$tmp/truncated/model.safetensors"
node truncated "$tmp/truncated"
check "truncated: exit 2" test "$code" -eq 2
check "truncated: names the file and the fault" grep -q "$tmp/truncated/model.safetensors: tensor .*(truncated?)" "$tmp/truncated.err"
check "truncated: nothing served" test ! -s "$tmp/truncated.out"

cp -r tests/data/hf/qwen3_5_text "$tmp/unknown"
python3 - "$tmp/unknown/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["architectures"] = ["MambaForCausalLM"]; json.dump(c, open(sys.argv[1], "w"))
PY
node unknown "$tmp/unknown"
check "unknown architecture: exit 2" test "$code" -eq 2
check "unknown architecture: named" grep -q 'config.json: architecture "MambaForCausalLM"' "$tmp/unknown.err"

timeout 30 "$ordo" bench matmul --config configs/qwen3_5_tiny.toml --rows 1 >"$tmp/bench.out" 2>"$tmp/bench.err"
check "ordo bench matmul: a checkpoint is refused, not benchmarked as a preset" test $? -ne 0
check "ordo bench matmul: says why" grep -q 'model.path = "tests/data/hf/qwen3_5_text": this bench runs the seeded presets only' "$tmp/bench.err"
timeout 30 "$ordo" bench forward --config configs/qwen3_5_tiny.toml --prompt-tokens 16 --decode-steps 1 \
  >"$tmp/bench.out" 2>"$tmp/bench.err"
check "ordo bench forward: runs the checkpoint itself" grep -q '"model":"tests/data/hf/qwen3_5_text"' "$tmp/bench.out"

# A good checkpoint is served: /v1/models names it (the directory by default), token-id prompts get
# completions whose first token is transformers' argmax on the fixture, a repeat is a prefix hit with
# the same digest, and text (which needs the tokenizer of issue 37 part 1b) is refused with a 400.
fixture=tests/data/hf/qwen3_5_text
read -r prompt want < <(python3 - "$fixture" <<'PY'
import json, struct, sys
d = sys.argv[1]
e = json.load(open(d + "/ordo_expected.json"))
v = e["vocab_size"]
raw = open(d + "/" + e["logits"]["file"], "rb").read()
for p, off in zip(e["prompts"], e["offsets"]):  # the first prompt whose greedy token is not a stop id
    row = struct.unpack_from("<%df" % v, raw, 4 * v * (off + len(p) - 1))
    best = max(range(v), key=lambda i: (row[i], -i))
    if best != 383 and len(p) > 1:
        print(json.dumps(p).replace(" ", ""), best)
        break
PY
)
printf '[model]\npath = "%s"\n' "$fixture" >"$tmp/served.toml"
start served node --config "$tmp/served.toml" --port 0
url=http://$(http_of "$tmp/served.out")
curl_() { curl --noproxy '*' -s --max-time 60 "$@"; }
check "/v1/models names the directory" grep -q '"id":"qwen3_5_text"' <<<"$(curl_ "$url/v1/models")"
body=$(curl_ "$url/v1/completions" -d "{\"prompt\": $prompt, \"max_tokens\": 1}")
check "a token-id prompt is completed" grep -q '"choices"' <<<"$body"
first=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["choices"][0]["token_ids"][0])' "$body" 2>/dev/null)
check "its token is transformers' argmax ($want)" test "$first" = "$want"
digest() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["ordo"]["logits_digest"])' "$1" 2>/dev/null; }
long=$(curl_ "$url/v1/completions" -d "{\"prompt\": $prompt, \"max_tokens\": 8}")
again=$(curl_ "$url/v1/completions" -d "{\"prompt\": $prompt, \"max_tokens\": 8}")
check "8 tokens generated" test "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])["choices"][0]["token_ids"]))' "$long")" -ge 1
check "a repeat has the cold run's digest" test -n "$(digest "$long")" -a "$(digest "$long")" = "$(digest "$again")"
status=$(curl_ -o "$tmp/text.json" -w '%{http_code}' "$url/v1/completions" -d '{"prompt": "Hello", "max_tokens": 2}')
check "a text prompt is a 400" test "$status" = 400
check "the 400 says why" grep -q "needs a tokenizer" "$tmp/text.json"
# Alone vs batched: three new prompts sent at once (one batch), then each alone on a fresh node.
ids() { python3 -c 'import sys; n, s = map(int, sys.argv[1:]); print([(i * 7919 + s * 104729) % 383 for i in range(n)])' "$@" | tr -d ' '; }
together=()
for i in 1 2 3; do
  curl_ "$url/v1/completions" -d "{\"prompt\": $(ids $((150 + 40 * i)) $i), \"max_tokens\": 6}" >"$tmp/together$i.json" &
  together+=($!)
done
wait "${together[@]}"
stop_all served

printf '[model]\npath = "%s/"\nserved_model_name = "tiny-qwen"\n' "$fixture" >"$tmp/named.toml"
start named node --config "$tmp/named.toml" --port 0
named_url=http://$(http_of "$tmp/named.out")
check "model.served_model_name is what /v1/models shows" grep -q '"id":"tiny-qwen"' <<<"$(curl_ "$named_url/v1/models")"
for i in 1 2 3; do
  alone=$(curl_ "$named_url/v1/completions" -d "{\"prompt\": $(ids $((150 + 40 * i)) $i), \"max_tokens\": 6}")
  check "prompt $i: batched with two others == alone on a fresh node" \
    test -n "$(digest "$alone")" -a "$(digest "$alone")" = "$(digest "$(cat "$tmp/together$i.json")")"
done
stop_all named
finish
