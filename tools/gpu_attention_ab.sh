#!/bin/bash
# The prefill attention tiles' A/B in one device call, from the repository root, with a bundle made
# by `make gpu-bundle`: `gpu-bundle/attention_ab`. Two switches pick the tile kernel
# (kernels/hip/attention_tile.hip): ORDO_ATTN_BLOCKS = 2 | 3 | 4 blocks per multiprocessor (the
# register cap of __launch_bounds__: 128, 80 or 64 registers) and ORDO_ATTN_STAGING = loop |
# batched (each thread's K, V and Q loads all issued before its first shared store). Each variant
# runs gpu_check (bitwise against the CPU), then exact prefill of 8 prompts of 512 tokens in two
# rounds (a variant that fails gpu_check is not timed); the fastest then runs `gpu-bundle/speed` (the
# whole table) and `gpu-bundle/checks`, and last ncu profiles one tile launch of the baseline and of
# the fastest. Between the A/B and the table, the exact matmul's warp arrangement is compared the same
# way (ORDO_MATMUL_CELLS). Everything is written under ${OUT:-/tmp}.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
SECONDS=0
variants=""
for v in 2:loop 2:batched 3:loop 3:batched 4:loop; do
  ORDO_ATTN_BLOCKS=${v%:*} ORDO_ATTN_STAGING=${v#*:} LD_LIBRARY_PATH="$here/lib" timeout 100 "$here/gpu_check" \
    >"$out/gpu_check_${v/:/_}.txt" 2>&1
  rc=$?
  echo "gpu_check $v rc=$rc"
  grep -E "FAIL|failures" "$out/gpu_check_${v/:/_}.txt" | head -3
  ((rc == 0)) && variants="$variants $v"
done
F=(--config configs/dense.toml --set model.size=1b --set device.kind=hip --set cache.num_blocks=1024 --prompt-tokens 512)
echo "== exact prefill, batch 8 (${SECONDS}s)"
for round in 1 2; do
  for v in $variants; do
    ORDO_ATTN_BLOCKS=${v%:*} ORDO_ATTN_STAGING=${v#*:} timeout 60 "$here/run" bench forward "${F[@]}" \
      --decode-steps 2 --batch 8 2>&1 | awk -v v="$v" '$2 == "prefill" {print "ab", v, "batch", $1, "prefill_tok_s", $5}'
  done
done | tee "$out/attention_ab.txt"
best=$(awk '{s[$2] += $6} END {m = 0; for (k in s) if (s[k] > m) {m = s[k]; b = k}; print b}' "$out/attention_ab.txt")
echo "best: $best (${SECONDS}s)"
export ORDO_ATTN_BLOCKS=${best%:*} ORDO_ATTN_STAGING=${best#*:}
# The exact matmul's lane tiles: a warp's four cells sharing rows (default) or outputs
# (ORDO_MATMUL_CELLS=cols, kernels/hip/matmul.hip); gpu_check, then µs per call at 512 and 4096 rows.
M=(--config configs/dense.toml --set model.size=1b --set device.kind=hip)
cells=rows
ORDO_MATMUL_CELLS=cols LD_LIBRARY_PATH="$here/lib" timeout 100 "$here/gpu_check" >"$out/gpu_check_cells_cols.txt" 2>&1
rc=$?
echo "gpu_check cells=cols rc=$rc"
grep -E "FAIL|failures" "$out/gpu_check_cells_cols.txt" | head -3
if ((rc == 0)); then
  for round in 1 2; do
    for c in rows cols; do
      ORDO_MATMUL_CELLS=$c timeout 60 "$here/run" bench matmul "${M[@]}" --rows 512 4096 2>&1 |
        awk -v c="$c" '$1 == "exact" {print "mm", c, $2, $3, $4, $5}'
    done
  done | tee "$out/matmul_cells.txt"
  cells=$(awk '{s[$2] += $6} END {print (s["cols"] < s["rows"] ? "cols" : "rows")}' "$out/matmul_cells.txt")
  for c in rows cols; do
    ORDO_MATMUL_CELLS=$c timeout 60 "$here/run" bench forward "${F[@]}" --decode-steps 2 --batch 8 2>&1 |
      awk -v c="$c" '$2 == "prefill" {print "mm", c, "prefill b8 tok/s", $5}'
  done
fi
export ORDO_MATMUL_CELLS=$cells
echo "cells: $cells (${SECONDS}s)"
"$here/speed" >/dev/null 2>&1
echo "speed done (${SECONDS}s)"
grep -E "^ +(1|8|16) (prefill|decode)|^== " "$out/speed.txt" | head -40
"$here/checks" >"$out/checks.txt" 2>&1
echo "checks rc=$? (${SECONDS}s)"
grep -E "FAIL|MISMATCH|all passed" "$out/checks.txt" | head -5
if command -v ncu >/dev/null; then
  # One tile launch of a 512-token prefill step, baseline and fastest: time, occupancy, stalls.
  for v in 2:loop "$best"; do
    ORDO_ATTN_BLOCKS=${v%:*} ORDO_ATTN_STAGING=${v#*:} timeout 90 ncu --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --page raw -k regex:attention_tile --launch-count 1 "$here/run" bench forward \
      "${F[@]}" --decode-steps 1 --batch 1 >"$out/ncu_attention_${v/:/_}.txt" 2>&1
    echo "ncu $v"
    grep -E "gpu__time_duration.sum|achieved_occupancy|warps_active.avg.pct|stalled_(long|short|barrier)[a-z_]*_per_issue_active" \
      "$out/ncu_attention_${v/:/_}.txt" | head -12
  done
fi
