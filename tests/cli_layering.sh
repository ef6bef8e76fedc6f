#!/bin/bash
# Layering of the sources: the picture in docs/architecture.md ("Folders"), checked. Each folder
# includes only from the folders below it:
#
#   tests/     anything
#   tools/     actors/, runtime/, messages/, kernels/ (never tests/)
#   actors/    runtime/, messages/ (never tools/, tests/); actors/net/ no actor (only actors/net/)
#   runtime/   messages/, and from kernels/ only the kernel ABI (kernel_args, batch, kv_layout,
#              kernel_table, object_checksum) and kernels/cpu/hash.hpp (the integer hash weight
#              generation shares bit for bit with kernels)
#   messages/  only messages/ (messages/ ↛ runtime/); CAF only in messages/type_ids.hpp
#   kernels/   only kernels/, and the one allowed upward include: the device interface
#              (runtime/device.hpp, runtime/device_registry.hpp), where HIP code implements a
#              device and registers its table
#
# runtime/ and kernels/ include no CAF or libuv header, and only kernels/hip_compat.hpp includes a
# GPU runtime header. Each of http_client, child_supervisor, worker_pool and write_error_body is
# defined exactly once. A test helper that reads a metric fails on a missing series.
# Fails naming each offending file:line.
# Usage: cli_layering.sh [ORDO] [ROOT] (CTest passes the ordo binary; it is not needed; ROOT, the
# tree to check, defaults to this script's repository).
set -uo pipefail
root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 1

device_interface='runtime/(device|device_registry)\.hpp'
kernel_abi='kernels/(kernel_args|batch|kv_layout|kernel_table|object_checksum|cpu/hash)\.hpp'
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]'
sources=(--include='*.hpp' --include='*.cpp' --include='*.h' --include='*.hip' --include='*.cu')

failed=0
# check DIR TARGET ALLOWED [EXCEPT]: every include of TARGET (an include path prefix, a regex)
# from a file under DIR must match ALLOWED (a regex of whole paths; "" allows nothing). Files whose
# path matches EXCEPT are skipped.
check() {
  local dir=$1 target=$2 allowed=$3 except=${4:-} line file where text
  [[ -d $dir ]] || return 0
  while IFS= read -r line; do
    [[ -n $line ]] || continue
    file=${line%%:*}
    [[ -n $except ]] && [[ $file =~ $except ]] && continue
    where=$file:$(cut -d: -f2 <<<"$line") # file:line
    text=${line#*:*:}                      # the include line
    [[ -n $allowed ]] && grep -qE "${include_re}(${allowed})[\">]" <<<"$text" && continue
    echo "layering: $where: $dir/ must not include ${text#"${text%%[![:space:]]*}"} (allowed: ${allowed:-nothing})"
    failed=1
  done < <(grep -rnE "${sources[@]}" "${include_re}(${target})" "$dir")
}
check kernels 'runtime/' "$device_interface"
check kernels '(messages|actors|tools|tests)/' ''
check messages '(runtime|kernels|actors|tools|tests)/' ''
check runtime 'kernels/' "$kernel_abi"
check runtime '(actors|tools|tests)/' ''
check actors '(tools|tests)/' ''
check actors/net 'actors/' 'actors/net/[a-z_]+\.hpp'
check tools 'tests/' ''
# Cores and kernels take plain data: no CAF or libuv; one file speaks to a GPU runtime.
check runtime 'caf/|uv\.h' ''
check kernels 'caf/|uv\.h' ''
check messages 'caf/' '' '^messages/type_ids\.hpp$'
for dir in actors messages runtime tools tests kernels; do
  check "$dir" '(hip/|cuda)' '' '^kernels/hip_compat\.hpp$'
done

# One definition each: a second HTTP client, supervisor, pool or error-body writer is a copy.
# A definition is `class|struct NAME` not ending in `;`, or a function NAME( whose signature
# reaches `{` before `;`.
defined_at() { # NAME → file:line of each definition under the source folders
  local name=$1
  grep -rnE "${sources[@]}" "^[[:space:]]*(class|struct)[[:space:]]+${name}\b[^;]*$" \
    actors messages runtime kernels tools tests 2>/dev/null | cut -d: -f1,2
  grep -rnE "${sources[@]}" "^[A-Za-z_].*[[:space:]*&]${name}[[:space:]]*\(" \
    actors messages runtime kernels tools tests 2>/dev/null | grep -vE ':[0-9]+:[[:space:]]*(//|return|#)' |
    while IFS=: read -r file line _; do
      tail -n +"$line" "$file" | tr '\n' ' ' | sed -E 's/[^;{]*//; s/^(.).*/\1/' | grep -q '{' && echo "$file:$line"
    done
}
for name in http_client child_supervisor worker_pool write_error_body; do
  mapfile -t at < <(defined_at "$name")
  if ((${#at[@]} == 0)); then
    echo "single definitions: $name is defined nowhere (expected exactly one)"
    failed=1
  elif ((${#at[@]} > 1)); then
    echo "single definitions: $name is defined ${#at[@]} times: ${at[*]} (keep one, shared)"
    failed=1
  fi
done

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
