#!/bin/bash
# CI compile check of the GPU code (no GPU needed): compiles every kernels/hip/*.hip with each GPU
# compiler given (nvcc for sm_90 through kernels/hip_compat.hpp, hipcc for gfx90a), two at a time,
# through ccache when present. Usage: gpu_compile_check.sh NVCC|"" HIPCC|"" OUTDIR
set -uo pipefail
nvcc=$1 hipcc=$2 out=$3
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
launcher=$(command -v ccache || true)
cmds=()
for src in "$root"/kernels/hip/*.hip; do
  stem=$(basename "$src" .hip)
  [[ -n $nvcc ]] && cmds+=("$launcher $nvcc -std=c++17 -arch=sm_90 -O2 -fmad=false -x cu -I$root -c $src -o $out/$stem.nvidia.o")
  [[ -n $hipcc ]] && cmds+=("$launcher $hipcc --offload-arch=gfx90a -std=c++17 -O2 -ffp-contract=off -I$root -x hip -c $src -o $out/$stem.amd.o")
done
((${#cmds[@]})) || { echo "gpu_compile_check: no GPU compiler given"; exit 0; }
failed=0
run_one() { # a failing compilation prints its command and output
  local log=$out/job$1.log
  $2 >"$log" 2>&1 || { echo "FAILED: $2"; cat "$log"; return 1; }
}
for i in "${!cmds[@]}"; do
  while (($(jobs -rp | wc -l) >= 2)); do wait -n || failed=1; done
  run_one "$i" "${cmds[$i]}" &
done
while (($(jobs -rp | wc -l) > 0)); do wait -n || failed=1; done
wait || failed=1
((failed)) && { echo "gpu_compile_check: FAILED"; exit 1; }
echo "gpu_compile_check: ${#cmds[@]} compilations passed"
