#!/bin/bash
# Layering of the sources (DESIGN §2.2): kernels/ and runtime/ meet at one seam. Fails naming each
# offending file:line when
#   - a file under kernels/ includes runtime/ other than the device seam (runtime/device.hpp,
#     runtime/device_registry.hpp: HIP code implements a device and registers its table there);
#   - a file under runtime/ includes kernels/ other than the kernel ABI (kernels/kernel_args.hpp,
#     kernels/batch.hpp, kernels/kv_layout.hpp, the kernel table interface kernels/kernel_table.hpp)
#     and kernels/cpu/hash.hpp (the integer hash weight generation shares bit for bit with kernels);
#   - a file under tools/ includes tests/;
#   - a test helper that reads a metric returns a default for a missing series.
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

# A test helper that reads a metric fails on a missing series (a default of 0 lets a test pass on
# a renamed or absent series): each C++ `metric…(` definition in tests/ REQUIREs the series within
# its first 8 lines, each Python `def metric…(` raises.
while IFS=: read -r file line _; do
  sed -n "${line},$((line + 8))p" "$file" | grep -q 'REQUIRE(' && continue
  echo "metrics: $file:$line: a metric helper must REQUIRE its series (not return a default)"
  failed=1
done < <(grep -HnE '^(double|int64_t|uint64_t|auto|int) metric[a-z_]*\(' tests/*.cpp tests/*.hpp 2>/dev/null)
while IFS=: read -r file line _; do
  sed -n "${line},$((line + 8))p" "$file" | grep -q 'raise' && continue
  echo "metrics: $file:$line: a metric helper must raise on a missing series (not return None)"
  failed=1
done < <(grep -HnE '^def metric[a-z_]*\(' tests/*.py 2>/dev/null)

((failed)) && { echo "cli_layering: FAILED"; exit 1; }
echo "cli_layering: passed"
