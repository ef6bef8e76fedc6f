#!/bin/bash
# Hugging Face checkpoints on the GPU machine, run from the repository root (issue 37 item 6):
# `gpu-bundle/model_checks` (made by `make gpu-bundle`). For each fixture under tests/data/hf and each
# KV dtype, a node on the CPU device and one on the GPU with the host tier serve the same token
# prompt: the GPU's cold answer, its HBM hit and its restore from the host tier after an HBM eviction
# must each have the CPU's digest. Then device.matmul = "tf32" and model.weight_dtype = "bf16" (not
# equal to the CPU): HBM hit and host-tier restore must equal the GPU's own cold run. Exits 1 on any
# mismatch.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
node() { # NAME SETS...: a [[node]] on configs/qwen3_5_tiny.toml
  local name=$1; shift
  printf '[[node]]\nname = "%s"\nconfig = "configs/qwen3_5_tiny.toml"\nset = [' "$name"
  local first=1 s
  for s in "$@"; do ((first)) || printf ', '; printf '"%s"' "$s"; first=0; done
  printf ']\n\n'
}
send() { # STEP NODE EXPECT
  printf '[[step]]\nname = "%s"\nsend = { node = "%s", prompt = { tokens = 700, seed = 37 }, max_tokens = 8 }\n' "$1" "$2"
  [[ -n $3 ]] && printf 'expect = { %s }\n' "$3"
  printf '\n'
}
restores() { # NODE REF: an HBM hit and a host-tier restore of NODE, each with REF's digest
  send "$1-hbm" "$1" "\"from.hbm\" = \">600\", digest = \"same_as:$2\""
  printf '[[step]]\nevict = { node = "%s", tier = "hbm" }\n\n' "$1"
  send "$1-host" "$1" "\"from.hbm\" = 0, \"from.cpu\" = \">600\", digest = \"same_as:$2\""
}
run_topology() { # LABEL FILE
  if "$here/run" topo run "$2" >"$tmp/out" 2>"$tmp/err"; then
    echo "model e2e $1: $(tail -n 1 "$tmp/out")"
  else
    echo "model e2e $1: FAILED"; cat "$tmp/out"; tail -n 20 "$tmp/err"; failed=1
  fi
}
for fixture in qwen3_5_text qwen3_5_vl_sharded qwen3_next_dense; do
  for kv in fp32 bf16 fp8; do
    {
      node cpu "model.path=tests/data/hf/$fixture" "model.kv_dtype=$kv"
      node gpu "model.path=tests/data/hf/$fixture" "model.kv_dtype=$kv" device.kind=hip kv_transfer.connector=offload
      send cold-cpu cpu ""
      send cold-gpu gpu 'resume_at = 0, digest = "same_as:cold-cpu"'
      restores gpu cold-cpu
    } >"$tmp/t.toml"
    run_topology "$fixture $kv: GPU cold, HBM hit and host tier == CPU" "$tmp/t.toml"
  done
done
for mode in device.matmul=tf32 model.weight_dtype=bf16; do
  {
    node gpu model.path=tests/data/hf/qwen3_5_text device.kind=hip kv_transfer.connector=offload "$mode"
    send cold gpu 'resume_at = 0'
    restores gpu cold
  } >"$tmp/t.toml"
  run_topology "qwen3_5_text $mode: HBM hit and host tier == the GPU's cold run" "$tmp/t.toml"
done
((failed)) && { echo "gpu model checks: FAILED"; exit 1; }
echo "gpu model checks: all passed"
