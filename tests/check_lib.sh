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

# Tests of `ordo topo run`: a temp dir in $tmp and the runner's pid in $runner (set it after
# starting one), SIGKILLed and removed on exit; and checks of a run's output file.
use_topo_runner() {
  tmp=$(mktemp -d)
  runner=
  trap 'if [ -n "$runner" ]; then kill -KILL "$runner" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
}
# Every pid a run printed ("pid N") is gone.
no_process_left() {
  local out=$1 p
  for p in $(grep -oE 'pid [0-9]+' "$out" | cut -d' ' -f2 | sort -u); do
    if kill -0 "$p" 2>/dev/null; then echo "left running: pid $p ($(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null))"; return 1; fi
  done
  return 0
}
# The logs directory a run named on its first line.
logs_dir() { sed -nE '1s/^topology .*: logs in (.*)$/\1/p' "$1"; }
last_line_is() { test "$(tail -n 1 "$1")" = "$2"; }

# Ready lines "listening on http://HOST:PORT [tcp://HOST:ACTOR_PORT]" of a process's stdout file:
# its HTTP endpoint, and its actor port (stores and P/D nodes).
http_of() { sed -n 's|^listening on http://\([^ ]*\).*|\1|p' "$1"; }
actor_port_of() { sed -n 's|^listening on http://[^ ]* tcp://[^:]*:\([0-9]*\)$|\1|p' "$1"; }

# start NAME ARGS...: runs `$ordo ARGS...` in the background with its output in $tmp/NAME.out and
# $tmp/NAME.err, adds its pid to $pids and sets ${NAME}_pid, and waits up to 30 s for its ready
# line (use_tmp_and_pids first).
start() {
  local name=$1; shift
  "$ordo" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  eval "${name}_pid=$!"
  wait_ready "$tmp/$name.out" 30
}

# stop_all NAME...: SIGTERM to each process `start` started, in order; each must exit 0 within 20 s.
stop_all() {
  local name pid
  for name in "$@"; do
    eval "pid=\$${name}_pid"
    kill -TERM "$pid"
    wait_exit "$pid" 20
    check "$name stops on SIGTERM" test "$code" -eq 0
  done
}
