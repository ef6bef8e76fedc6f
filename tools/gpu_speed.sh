#!/bin/bash
# Issue 14's speed table in one device call, from the repository root, with a bundle made by
# `make gpu-bundle`: `gpu-bundle/speed [--quick]`. gpu_check first (every exact kernel bitwise
# against the CPU), then dense 1b exact and bf16 against tools/torch_reference.py's CUDA-graph
# anchors, A/B with ORDO_ATTENTION_TILES=split (and ORDO_LANE_TILES=warps), the matmul table,
# decode while saving (dense and qsa_gdn_ple; bf16 also with ORDO_PACED_CTAS 2, 4 and 16), the
# host tier's save / load against a plain copy, and ncu on the matmul's lane tiles in both
# arrangements. Each block is bounded by a timeout; everything is also written to
# ${OUT:-/tmp}/speed.txt, since a call returns only the tail of its output. --quick: decode 8
# steps and no saves, offload, matmul table or ncu.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run="$here/run"
out=${OUT:-/tmp}
quick=0
[[ ${1:-} == --quick ]] && quick=1
exec > >(tee -a "$out/speed.txt") 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
steps=32
((quick)) && steps=8
F=(--config configs/dense.toml --set model.size=1b --set device.kind=hip --set cache.num_blocks=1024 --prompt-tokens 512)
torch() { timeout 150 python3 tools/torch_reference.py --preset dense --size 1b --prompt-tokens 512 \
  --decode-steps "$steps" --batch 1 8 16 --cuda-graph --dtype "$1"; }
echo "== gpu_check"
SECONDS=0
LD_LIBRARY_PATH="$here/lib" timeout 200 "$here/gpu_check" >"$out/gpu_check.txt" 2>&1
echo "gpu_check rc=$? in ${SECONDS}s"
grep -E "FAIL|failures|PASS" "$out/gpu_check.txt" | tail -3
for dtype in fp32 bf16; do
  set_dtype=()
  [[ $dtype == bf16 ]] && set_dtype=(--set model.weight_dtype=bf16)
  echo "== ordo $dtype"
  timeout 150 "$run" bench forward "${F[@]}" "${set_dtype[@]}" --decode-steps "$steps" --batch 1 8 16
  echo "== ordo $dtype, ORDO_ATTENTION_TILES=split"
  ORDO_ATTENTION_TILES=split timeout 150 "$run" bench forward "${F[@]}" "${set_dtype[@]}" --decode-steps "$steps" --batch 1 8 16
  if [[ $dtype == fp32 ]]; then
    echo "== ordo $dtype, ORDO_ATTENTION_TILES=split ORDO_LANE_TILES=warps"
    ORDO_ATTENTION_TILES=split ORDO_LANE_TILES=warps timeout 150 "$run" bench forward "${F[@]}" --decode-steps "$steps" --batch 1 8 16
  fi
  echo "== torch $dtype + CUDA graph"
  torch "$dtype"
done
((quick)) && exit 0
M=(--config configs/dense.toml --set model.size=1b --set device.kind=hip)
echo "== matmul"
timeout 120 "$run" bench matmul "${M[@]}" --rows 1 16 512 4096
echo "== matmul, ORDO_LANE_TILES=warps"
ORDO_LANE_TILES=warps timeout 120 "$run" bench matmul "${M[@]}" --rows 512 4096
echo "== decode while saving"
timeout 150 "$run" bench forward "${F[@]}" --decode-steps 32 --batch 1 8 16 --save-chunks 1
timeout 150 "$run" bench forward "${F[@]}" --set model.weight_dtype=bf16 --decode-steps 32 --batch 1 8 16 --save-chunks 1
for ctas in 2 4 16; do
  echo "== decode while saving, bf16, ORDO_PACED_CTAS=$ctas (default 8)"
  ORDO_PACED_CTAS=$ctas timeout 150 "$run" bench forward "${F[@]}" --set model.weight_dtype=bf16 --decode-steps 32 --batch 1 8 --save-chunks 1
done
timeout 150 "$run" bench forward --config configs/default.toml --set model.size=1b --set device.kind=hip \
  --set cache.num_blocks=1024 --prompt-tokens 512 --decode-steps 32 --batch 1 8 --save-chunks 2
echo "== host tier"
for config in configs/default.toml configs/dense.toml; do
  timeout 120 "$run" bench offload --config "$config" --set model.size=1b --set device.kind=hip --chunks 32 --repeats 5
done
if command -v ncu >/dev/null; then
  echo "== ncu: lane tiles, 512 rows (both arrangements; full report in ncu_matmul.txt)"
  for v in lanes warps; do
    ORDO_LANE_TILES=$v timeout 120 ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
      --section Occupancy -k regex:matmul_lane --launch-count 2 "$run" bench matmul "${M[@]}" --rows 512 --repeats 1 \
      >>"$out/ncu_matmul.txt" 2>&1
    grep -E "matmul_lane|Duration|Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|Stall|Warp Cycles Per Issued" "$out/ncu_matmul.txt" | tail -20
  done
fi
