#!/usr/bin/env bash
# `ordo node` with model.path: a malformed checkpoint stops the node before it serves (exit 2, the file
# and the fault on stderr, nothing on stdout); so does a good one, until its forward is wired in.
set -u
ordo=${1:?usage: cli_model_path.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

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

node good tests/data/hf/qwen3_5_vl_sharded
check "good checkpoint: exit 2, not a preset served instead" test "$code" -eq 2
check "good checkpoint: says why" grep -q "a qwen3_5 checkpoint; its forward is not wired into the node yet" "$tmp/good.err"
check "good checkpoint: nothing served" test ! -s "$tmp/good.out"
finish
