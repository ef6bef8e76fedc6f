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
