# Sourced by tests/cli_*.sh: `check NAME COMMAND...` counts a passed or failed expectation;
# `finish` prints "N passed, N failed" and returns non-zero when any failed.
passed=0 failed=0
check() {
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name"; fi
}
finish() {
  echo "$passed passed, $failed failed"
  test "$failed" -eq 0
}

# Waits up to $2 seconds (default 10) for the ready line ("listening on ...") in file $1.
wait_ready() {
  for _ in $(seq 1 $((${2:-10} * 10))); do grep -q listening "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "no ready line in $1"
  return 1
}

# Waits up to $2 seconds for pid $1 (a child of this shell) to exit; sets `code` to its exit
# status, 124 if it did not exit in time.
wait_exit() {
  local p=$1 limit=$2
  code=124
  for _ in $(seq 1 $((limit * 10))); do
    if ! kill -0 "$p" 2>/dev/null; then
      wait "$p"
      code=$?
      return
    fi
    sleep 0.1
  done
}

# A temp dir in $tmp and a list of started pids in $pids, both cleaned up on exit (SIGKILL to every
# pid still there, then the dir removed).
use_tmp_and_pids() {
  tmp=$(mktemp -d)
  pids=()
  trap 'for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
}
