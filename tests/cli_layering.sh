#!/bin/bash
# Layering of the sources (DESIGN §2.2): kernels/ and runtime/ meet at one seam. Fails naming each
# offending file:line when
#   - a file under kernels/ includes runtime/ other than the device seam (runtime/device.hpp,
#     runtime/device_registry.hpp: HIP code implements a device and registers its table there);
#   - a file under runtime/ includes kernels/ other than the kernel ABI (kernels/kernel_args.hpp,
#     kernels/batch.hpp, kernels/kv_layout.hpp, the kernel table interface kernels/kernel_table.hpp)
#     and kernels/cpu/hash.hpp (the integer hash weight generation shares bit for bit with kernels);
#   - a file under tools/ includes tests/.
# Usage: cli_layering.sh [ORDO] (CTest passes the ordo binary; it is not needed).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

kernels_may_include='runtime/(device|device_registry)\.hpp'
runtime_may_include='kernels/(kernel_args|batch|kv_layout|kernel_table|object_checksum|cpu/hash)\.hpp'
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]'

failed=0
# check DIR TARGET ALLOWED: every include of TARGET/... from a file under DIR must match ALLOWED.
check() {
  local dir=$1 target=$2 allowed=$3 line where text
  [[ -d $dir ]] || return 0
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    where=${line%%:*}:$(cut -d: -f2 <<<"$line") # file:line
    text=${line#*:*:}                            # the include line
    [[ -n $allowed ]] && grep -qE "${include_re}(${allowed})[\">]" <<<"$text" && continue
    echo "layering: $where: $dir/ must not include ${text#"${text%%[![:space:]]*}"} (allowed: ${allowed:-nothing})"
    failed=1
  done < <(grep -rnE "${include_re}${target}/" "$dir")
}
check kernels runtime "$kernels_may_include"
check runtime kernels "$runtime_may_include"
check tools tests ""

((failed)) && { echo "cli_layering: FAILED"; exit 1; }
echo "cli_layering: passed"
