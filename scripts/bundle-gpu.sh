#!/usr/bin/env bash
# scripts/bundle-gpu.sh BINARY DIR — makes BINARY (built here, Debian 12) runnable on the GPU
# machine (Ubuntu 24.04, no package registries): copies it and every shared library it links
# except the C/C++ runtime and the NVIDIA driver (that machine's own) into DIR/lib (the binary
# stripped of debug info), and writes
# DIR/run, which starts it with DIR/lib on the library path.
set -euo pipefail
if [[ $# -ne 2 || ! -x $1 ]]; then
  echo "usage: $0 BINARY DIR" >&2
  exit 2
fi
binary=$1 dir=$2
name=$(basename "$binary")
system='^(ld-linux.*|linux-vdso|libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|libcuda|libnvidia.*)\.so'
mkdir -p "$dir/lib"
cp "$binary" "$dir/$name"
strip "$dir/$name" # debug info would push the bundle past what a device call carries (64 MiB)
while read -r lib path; do
  [[ $lib =~ $system ]] && continue
  if [[ ! -f $path ]]; then
    echo "$0: $lib is not found on this machine" >&2
    exit 1
  fi
  cp -L "$path" "$dir/lib/$lib"
done < <(ldd "$binary" | awk '$2 == "=>" { print $1, $3 }')
cat >"$dir/run" <<LAUNCH
#!/usr/bin/env bash
dir=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="\$dir/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "\$dir/$name" "\$@"
LAUNCH
chmod +x "$dir/run"
echo "$dir: $name and $(find "$dir/lib" -type f | wc -l) libraries ($(du -sh "$dir" | cut -f1))"
