#!/bin/bash
# Store server checks on the GPU machine (issue 12), from the repository root, with a bundle made
# by `make gpu-bundle`: the offload bench through an `ordo store` process against the in-process
# tier and a plain copy (one run each), and the acceptance (tests/store_acceptance.py) with every
# node on the GPU device: restarts, two nodes, SIGKILL of the store, the chunk table, bit-exact.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
run="$here/run"
failed=0
"$run" bench offload --config configs/default.toml --set model.size=1b --set device.kind=hip --chunks 32 --repeats 5 || failed=1
"$run" bench offload --config configs/dense.toml --set model.size=1b --set device.kind=hip --chunks 32 --repeats 5 || failed=1
ORDO_NODE_SET="device.kind=hip" timeout 580 python3 tests/store_acceptance.py "$run" | grep -E "^(FAILED|ok:|[0-9]+ passed)" || failed=1
echo "gpu store checks: $([ $failed -eq 0 ] && echo PASS || echo FAIL)"
exit $failed
