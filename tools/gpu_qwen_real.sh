#!/bin/bash
# Issue 37 item 8 on the GPU machine, from the repository root, with a bundle made by
# `make gpu-bundle`: `gpu-bundle/qwen_real [--layers N] [--bench] [--ttft TOKENS...]`.
# Writes a random checkpoint with configs/models/qwen3_5_27b's widths and the first N of its 64
# layers (`ordo model random`; N = 16 by default: 12 GDN and 4 gated-attention layers), then
#   --bench: `ordo bench forward` with bf16 weights: the checkpoint's read and upload times,
#            prefill and decode at batch 1 / 8 / 16 against the weight-streaming floor;
#   --ttft:  tools/ttft_restore.py on one node: each length cold, from HBM and restored from the
#            host tier, digests equal, each restore against HBM hit + 1.5 x the transfer floor.
# Everything is also written to ${OUT:-/tmp}/qwen_real.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run="$here/run"
out=${OUT:-/tmp}
layers=16
bench=0
ttft=()
while (($#)); do
  case $1 in
    --layers) layers=$2; shift 2 ;;
    --bench) bench=1; shift ;;
    --ttft) shift; while (($#)) && [[ $1 != --* ]]; do ttft+=("$1"); shift; done ;;
    *) echo "usage: qwen_real [--layers N] [--bench] [--ttft TOKENS...]" >&2; exit 2 ;;
  esac
done
exec > >(tee -a "$out/qwen_real.txt") 2>&1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
free -g | sed -n 2p
ck=/tmp/qwen3_5_27b_L$layers
if [[ ! -f $ck/model.safetensors ]]; then
  SECONDS=0
  "$run" model random --like configs/models/qwen3_5_27b/config.json --out "$ck" --layers "$layers" || exit 1
  echo "checkpoint written in ${SECONDS} s"
fi
common=(--set "model.path=$ck" --set device.kind=hip --set model.weight_dtype=bf16 --set cache.block_size=64
        --set cache.chunk_size=256 --set scheduler.max_num_seqs=16)
if ((bench)); then
  echo "== bench forward, bf16 weights, fp32 KV"
  timeout 300 "$run" bench forward --config configs/qwen3_5_tiny.toml "${common[@]}" --set cache.num_blocks=512 \
    --set scheduler.max_batch_tokens=2048 --prompt-tokens 512 --decode-steps 32 --batch 1 8 16
  echo "bench forward rc=$?"
fi
if ((${#ttft[@]})); then
  echo "== ttft_restore ${ttft[*]}"
  timeout 560 python3 tools/ttft_restore.py --ordo "$run" --config configs/qwen3_5_tiny.toml "${common[@]}" \
    --set cache.num_blocks=4200 --set scheduler.max_batch_tokens=2048 --set cache.checkpoint_interval=-1 \
    --set store.capacity_mb=16384 --timeout 480 --tokens "${ttft[@]}"
  echo "ttft_restore rc=$?"
fi
