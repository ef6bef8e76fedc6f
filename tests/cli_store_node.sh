#!/usr/bin/env bash
# Issue 12's acceptance with real processes: nodes with kv_transfer.connector = "store" against
# `ordo store` (restart, two nodes, identities, namespaces, SIGKILL of the store, chunk
# granularity, a traced run). The driver is tests/store_acceptance.py.
set -u
ordo=${1:?usage: cli_store_node.sh PATH_TO_ORDO}
exec timeout 600 python3 "$(dirname "$0")/store_acceptance.py" "$ordo"
