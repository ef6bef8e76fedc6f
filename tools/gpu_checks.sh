#!/bin/bash
# Every GPU check in one command, run from the repository root on the GPU machine (it builds
# nothing there): `gpu-bundle/checks`. Made here by `make gpu-bundle`.
#  1. gpu_check: each HIP kernel against its CPU reference on fresh random inputs, then the tiny
#     model's logits on both devices (cold, chunked, HBM hit, batched, decode).
#  2. the node end to end: `ordo demo` (multi-turn, two passes with an HBM eviction between, so
#     pass 2 resumes from HBM prefixes and state checkpoints, or with kv_transfer.connector =
#     offload from the host tier: gathers and scatters between the arena and pinned host memory)
#     on the CPU and on the GPU device of the same binary, for every preset in fp32 and bf16 (and
#     fp8 through the host tier): resume points, tiers and digests must match.
#  3. the same with device.matmul = "tf32" and with model.weight_dtype = "bf16": each restored
#     request must equal its own cold run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
failed=0
LD_LIBRARY_PATH="$here/lib" "$here/gpu_check" || failed=1
tmp=$(mktemp -d)
for connector in none offload; do
  for config in configs/default.toml configs/gdn_hybrid.toml configs/dense.toml; do
    kvs="fp32 bf16"
    [[ $connector == offload ]] && kvs="fp32 bf16 fp8"
    for kv in $kvs; do
      for kind in cpu hip; do
        "$here/run" demo --config "$config" --set device.kind=$kind --set model.kv_dtype=$kv \
          --set kv_transfer.connector=$connector 2>/dev/null |
          awk '$1 ~ /^conv/ {print $1, $3, $4, $6, $9, $13, $14}' >"$tmp/$kind"
      done
      cpu_hits=$(awk '$5 > 0' "$tmp/hip" | wc -l)
      if [[ -s $tmp/hip ]] && diff "$tmp/cpu" "$tmp/hip" >/dev/null && ! grep -q " NO$" "$tmp/hip"; then
        echo "node e2e $connector $config $kv: GPU == CPU ($(wc -l <"$tmp/hip") requests, $cpu_hits from the host tier: resume points, tiers and logits digests)"
      else
        echo "node e2e $connector $config $kv: MISMATCH"; diff "$tmp/cpu" "$tmp/hip"; failed=1
      fi
    done
  done
done
# device.matmul = "tf32" and model.weight_dtype = "bf16" (matrix units): not equal to the CPU, so
# each pass-2 digest (restored from HBM, or from the host tier) is compared with its own cold pass
# on the GPU: `ordo demo` exits 1 on any mismatch.
for mode in device.matmul=tf32 model.weight_dtype=bf16; do
  for connector in none offload; do
    for config in configs/default.toml configs/gdn_hybrid.toml configs/dense.toml; do
      if "$here/run" demo --config "$config" --set device.kind=hip --set "$mode" \
        --set kv_transfer.connector=$connector 2>/dev/null >"$tmp/mu"; then
        resumed=$(awk '$1 ~ /^conv/ && $4 > 0' "$tmp/mu" | wc -l)
        echo "node e2e $mode $connector $config: restored == cold on the GPU ($(awk '$1 ~ /^conv/' "$tmp/mu" | wc -l) requests, $resumed resumed)"
      else
        echo "node e2e $mode $connector $config: MISMATCH"; cat "$tmp/mu"; failed=1
      fi
    done
  done
done
rm -rf "$tmp"
((failed)) && { echo "gpu checks: FAILED"; exit 1; }
echo "gpu checks: all passed"
