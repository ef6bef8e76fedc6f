#!/usr/bin/env bash
# A short soak (tools/soak.py): valid, malformed and hung-up requests at once against a node
# with the host tier and chaos on; every valid answer carries its solo digest, the node stays
# up, its descriptors come back and its memory stops growing. The full run: --requests 10000.
set -u
ordo=${1:?usage: cli_soak.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
timeout 900 python3 tools/soak.py --ordo "$ordo" --requests 1500 --clients 6 --sample-every 100 >/tmp/ordo_soak.$$ 2>&1
code=$?
cat /tmp/ordo_soak.$$
check "soak passes" test $code -eq 0
check "soak printed its JSON line" grep -q '^SOAK_JSON ' /tmp/ordo_soak.$$
rm -f /tmp/ordo_soak.$$
finish
