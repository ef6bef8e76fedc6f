#!/bin/bash
# Issue 14's speed table in one device call, from the repository root, with a bundle made by
# `make gpu-bundle`: `gpu-bundle/speed [--quick]`. gpu_check first (every exact kernel bitwise
# against the CPU), then dense 1b exact and bf16 (also with prefill steps of 2048 tokens) against
# tools/torch_reference.py's CUDA-graph anchors, exact with bf16 and fp8 KV, and ncu on one exact
# prefill step kernel by kernel; then the matmul table, decode while saving (dense and
# qsa_gdn_ple), the host tier's save / load against a plain copy, a 32K-token prompt restored
# from the host tier, and the lane tiles' stall reasons. Each block is bounded by a timeout;
# everything is also written to ${OUT:-/tmp}/speed.txt (ncu's reports beside it), since a call
# returns only the tail of its output. --quick: decode 8 steps, and stop after the step's kernels.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run="$here/run"
out=${OUT:-/tmp}
quick=0
[[ ${1:-} == --quick ]] && quick=1
exec > >(tee -a "$out/speed.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
nvidia-smi topo -m 2>&1 | head -3 # the GPU's CPU and NUMA affinity: the host tier's kernels read across the link
steps=32
((quick)) && steps=8
F=(--config configs/dense.toml --set model.size=1b --set device.kind=hip --set cache.num_blocks=1024 --prompt-tokens 512)
M=(--config configs/dense.toml --set model.size=1b --set device.kind=hip)
forward() { timeout 150 "$run" bench forward "${F[@]}" --decode-steps "$steps" --batch 1 8 16 "$@"; }
torch() { timeout 150 python3 tools/torch_reference.py --preset dense --size 1b --prompt-tokens 512 \
  --decode-steps "$steps" --batch 1 8 16 --cuda-graph --dtype "$1"; }
echo "== gpu_check"
SECONDS=0
LD_LIBRARY_PATH="$here/lib" timeout 200 "$here/gpu_check" >"$out/gpu_check.txt" 2>&1
echo "gpu_check rc=$? in ${SECONDS}s"
grep -E "FAIL|failures|PASS" "$out/gpu_check.txt" | tail -3
echo "== ordo exact"
forward
echo "== ordo exact, max_batch_tokens 2048"
forward --set scheduler.max_batch_tokens=2048
echo "== torch fp32 + CUDA graph"
torch fp32
echo "== ordo bf16"
forward --set model.weight_dtype=bf16
echo "== ordo bf16, max_batch_tokens 2048"
forward --set model.weight_dtype=bf16 --set scheduler.max_batch_tokens=2048
echo "== torch bf16 + CUDA graph"
torch bf16
for kv in bf16 fp8; do
  echo "== ordo exact, $kv KV"
  forward --set model.kv_dtype=$kv
done
if command -v ncu >/dev/null; then
  echo "== ncu: one exact prefill step of 512 tokens, kernel by kernel (ncu_forward.txt)"
  timeout 150 ncu --metrics gpu__time_duration.sum --print-summary per-kernel "$run" bench forward "${F[@]}" \
    --decode-steps 1 --batch 1 >"$out/ncu_forward.txt" 2>&1
  grep -E "^  [a-z_ ]*(<|\()|gpu__time_duration" "$out/ncu_forward.txt" | head -80
fi
((quick)) && exit 0
echo "== matmul"
timeout 120 "$run" bench matmul "${M[@]}" --rows 1 16 512 4096
echo "== decode while saving"
timeout 150 "$run" bench forward "${F[@]}" --decode-steps 32 --batch 1 8 16 --save-chunks 1
timeout 150 "$run" bench forward "${F[@]}" --set model.weight_dtype=bf16 --decode-steps 32 --batch 1 8 16 --save-chunks 1
timeout 150 "$run" bench forward --config configs/default.toml --set model.size=1b --set device.kind=hip \
  --set cache.num_blocks=1024 --prompt-tokens 512 --decode-steps 32 --batch 1 8 --save-chunks 2
echo "== host tier"
for config in configs/default.toml configs/dense.toml; do
  timeout 120 "$run" bench offload --config "$config" --set model.size=1b --set device.kind=hip --chunks 32 --repeats 5
done
echo "== 32K-token prompt restored from the host tier (qsa_gdn_ple 1b)"
timeout 150 python3 tools/ttft_restore.py --ordo "$run" --config configs/default.toml --set model.size=1b \
  --set device.kind=hip --set cache.checkpoint_interval=-1 --set cache.num_blocks=640 --set store.capacity_mb=2048 \
  --tokens 32767
command -v ncu >/dev/null || exit 0
echo "== ncu: the lane tiles' stall reasons, 512 and 4096 rows (ncu_matmul.txt)"
for rows in 512 4096; do
  timeout 120 ncu --section WarpStateStats --section SpeedOfLight --page raw -k regex:matmul_lanes \
    --launch-count 1 "$run" bench matmul "${M[@]}" --rows "$rows" --repeats 1 >>"$out/ncu_matmul.txt" 2>&1
done
grep -E "matmul_lanes|gpu__time_duration.sum|issue_stalled_[a-z_]*_per_issue_active.ratio|l1tex__throughput.avg.pct" \
  "$out/ncu_matmul.txt" | awk '$NF+0 > 0.2 || /matmul_lanes|duration/' | head -60
