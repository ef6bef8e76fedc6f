#!/usr/bin/env bash
# Installs the Debian packages ordo builds with (DESIGN §7) when any is missing.
# `--amd` adds Debian's HIP compiler for `make gpu-amd-check` (about 650 MB on disk).
# Runs `apt-get update` at most once. Safe to run repeatedly.
set -euo pipefail
pkgs=(cmake g++ make ccache pkg-config
      libcaf-dev libcapnp-dev capnproto libuv1-dev libspdlog-dev catch2
      libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libxxhash-dev libhttp-parser-dev
      curl)
[[ ${1:-} == --amd ]] && pkgs+=(hipcc libamdhip64-dev rocm-device-libs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) == 0 ]] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
