#!/bin/bash
# docs/config.md's key tables are what `ordo config keys` prints from the one declaration of each
# key (runtime/config_keys.hpp, issue 38 items 7 and 8): fails with the diff when the docs are
# stale, and says how to regenerate them.
set -uo pipefail
ordo=${1:?usage: cli_config_docs.sh PATH_TO_ORDO}
cd "$(dirname "$0")/.." || exit 1
source tests/check_lib.sh

begin='<!-- BEGIN ordo config keys'
end='<!-- END ordo config keys -->'
generated=$("$ordo" config keys)
rc=$?
check "ordo config keys exits 0" test "$rc" = 0
check "ordo config keys prints a row per key" grep -q '^| `cache.block_size` | integer | `64` |' <<<"$generated"
check "docs/config.md has one BEGIN and one END marker" \
  test "$(grep -c "^$begin" docs/config.md)" = 1 -a "$(grep -c "^$end" docs/config.md)" = 1
in_docs=$(sed -n "\#^$begin#,\#^$end#p" docs/config.md | sed '1d;$d')
stale=$(diff -u <(printf '%s\n' "$in_docs") <(printf '%s\n' "$generated"))
if [[ -n $stale ]]; then
  printf '%s\n' "$stale"
  echo "docs/config.md is stale: put the output of \`ordo config keys\` between its BEGIN and END markers"
fi
check "docs/config.md holds what ordo config keys prints" test -z "$stale"
finish
