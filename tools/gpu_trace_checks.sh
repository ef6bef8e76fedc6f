#!/bin/bash
# Trace checks on the GPU machine (issue: traces), from the repository root, with a bundle made by
# `make gpu-bundle`: what recording costs (`ordo bench trace`, A/B interleaved), a recorded offload
# run on the GPU device that `trace check` passes and every actor replays identically (and the
# node re-driven with every digest equal), and each faults.drop_edge found by `trace check`.
# Writes the clean trace to ${OUT:-/tmp} for `ordo trace timeline` elsewhere.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run="$here/run"
out=${OUT:-/tmp}
tmp=$(mktemp -d)
failed=0
"$run" bench trace --config configs/default.toml --set device.kind=hip --rounds 9 --requests 48 --concurrency 4 || failed=1
"$run" bench trace --config configs/offload.toml --set device.kind=hip --rounds 5 --requests 48 --concurrency 4 || failed=1
"$run" demo --config configs/offload.toml --set device.kind=hip --set cache.num_blocks=24 --set trace.node=h200 \
  --trace "$out/h200_offload.trace" 2>/dev/null | tail -3 || failed=1
"$run" trace check "$out/h200_offload.trace" || failed=1
for actor in scheduler block_pool connector store; do
  "$run" replay "$out/h200_offload.trace" --actor $actor || failed=1
done
"$run" replay "$out/h200_offload.trace" --node 2>/dev/null | tail -1 || failed=1
for edge in clear_load load_forward forward_save upload_compute; do
  "$run" demo --config configs/offload.toml --set device.kind=hip --set cache.num_blocks=24 \
    --set faults.drop_edge=$edge --trace "$tmp/$edge.trace" >/dev/null 2>&1
  echo "drop_edge=$edge: $("$run" trace check "$tmp/$edge.trace" | head -1)"
done
rm -rf "$tmp"
echo "gpu trace checks: $([ $failed -eq 0 ] && echo PASS || echo FAIL)"
exit $failed
