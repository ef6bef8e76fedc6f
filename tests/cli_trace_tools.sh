#!/usr/bin/env bash
# `ordo trace show` and `ordo trace timeline` on recorded runs (docs/traces.md): two demo runs of
# the offload config with chaos, recorded as two nodes (in parallel, ~20 s); show prints a header
# and one line per record, filters by actor and step, shows a file cut short up to its cut, and
# refuses a file that is not a trace; timeline writes Chrome trace JSON that a checker accepts.
# Hostile files made from tests/data/golden.trace (a segment table claiming 8 GiB, 2^32 segments,
# a record whose pointers alias one list, single bit flips): show, timeline, check and replay end
# within 5 s under 100 MB, a damaged file with exit 2 and exactly one line on stderr.
set -euo pipefail
ordo=${1:?usage: cli_trace_tools.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

record() { # NAME NODE: a demo run recorded to $tmp/NAME.trace with trace.node=NODE
  timeout 120 "$ordo" demo --config configs/offload.toml --set device.chaos_seed=3 --set trace.node="$2" \
    --trace "$tmp/$1.trace" >"$tmp/$1.demo" 2>&1
}
record a alpha & pid_a=$!
record b beta & pid_b=$!
rc_a=0 rc_b=0
wait $pid_a || rc_a=$?
wait $pid_b || rc_b=$?
check "demo run a exits 0" test $rc_a -eq 0
check "demo run b exits 0" test $rc_b -eq 0

# --- show ----------------------------------------------------------------------------------------
rc=0
timeout 60 "$ordo" trace show "$tmp/a.trace" >"$tmp/show" 2>"$tmp/err" || rc=$?
check "show exits 0" test $rc -eq 0
check "show starts with the header line" \
  grep -qE "^trace .*a\.trace: node alpha, ordo .*, schema 1, namespace [0-9a-f]{16}, chaos seed 3, config [0-9a-f]{16}" <(head -1 "$tmp/show")
records=$(capnp decode -I. messages/trace/trace.capnp TraceRecord <"$tmp/a.trace" 2>/dev/null | grep -c '^(' || true)
lines=$(wc -l <"$tmp/show")
if [ "${records:-0}" -gt 0 ]; then # capnp decode counts the header too: one line each
  check "show prints one line per record ($lines lines, $records records)" test "$lines" -eq "$records"
else
  check "show prints many lines ($lines)" test "$lines" -gt 100
fi
for kind in step_plan pool_step_done forward load done; do
  check "show has $kind lines" grep -qE "^ +[0-9]+ +\+[0-9.]+ +step [0-9]+\.[0-9]+ +[a-z_]+ +(in|out|local) +[-a-z_]+ +$kind " "$tmp/show"
done
check "show keeps every line short" test "$(awk '{ if (length > 300) n++ } END { print n + 0 }' "$tmp/show")" -eq 0
# Each payload kind's summary (tools/trace/trace_show.cpp:payload_summaries) of the golden trace,
# line for line (tests/data/golden.show: `ordo trace show tests/data/golden.trace`, run from the
# repository root; remade with the golden trace).
check "show prints the golden trace as tests/data/golden.show says" \
  diff -u tests/data/golden.show <(timeout 60 "$ordo" trace show tests/data/golden.trace 2>&1)

timeout 60 "$ordo" trace show "$tmp/a.trace" --actor block_pool >"$tmp/pool"
check "--actor block_pool prints block_pool lines" test "$(tail -n +2 "$tmp/pool" | wc -l)" -gt 10
check "--actor block_pool prints only block_pool lines" \
  test "$(tail -n +2 "$tmp/pool" | awk '$5 != "block_pool"' | wc -l)" -eq 0
timeout 60 "$ordo" trace show "$tmp/a.trace" --step 3 >"$tmp/step3"
check "--step 3 prints step-3 lines" test "$(tail -n +2 "$tmp/step3" | wc -l)" -gt 5
check "--step 3 prints only step-3 lines" \
  test "$(tail -n +2 "$tmp/step3" | awk '$3 != "step" || $4 !~ /^[0-9]+\.3$/' | wc -l)" -eq 0

size=$(stat -c %s "$tmp/a.trace")
head -c $((size / 2)) "$tmp/a.trace" >"$tmp/cut.trace"
rc=0
timeout 60 "$ordo" trace show "$tmp/cut.trace" >"$tmp/cut" 2>"$tmp/err" || rc=$?
check "a cut file shows with exit 0" test $rc -eq 0
check "a cut file ends with the cut" grep -qE '^\(file cut short after record [0-9]+: .*\)$' <(tail -1 "$tmp/cut")
check "a cut file shows the records before the cut" test "$(wc -l <"$tmp/cut")" -gt 100

echo "not a trace" >"$tmp/plain.txt"
rc=0
timeout 60 "$ordo" trace show "$tmp/plain.txt" >"$tmp/out" 2>"$tmp/err" || rc=$?
check "a file that is not a trace exits 2" test $rc -eq 2
check "a file that is not a trace is named" grep -q "plain.txt" "$tmp/err"

# --- timeline ------------------------------------------------------------------------------------
rc=0
timeout 60 "$ordo" trace timeline "$tmp/a.trace" "$tmp/b.trace" -o "$tmp/t.json" >"$tmp/out" 2>"$tmp/err" || rc=$?
check "timeline exits 0" test $rc -eq 0
check "timeline says what it wrote" \
  grep -qE "^wrote .*t\.json: [0-9]+ events from 2 files \(nodes: alpha, beta\)$" "$tmp/out"
cat >"$tmp/check.py" <<'PY'
import collections, json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
nodes = sys.argv[2:]
bad = []
for e in events:
    for k in ("ph", "pid", "tid", "ts"):
        if k not in e:
            bad.append("event without %s: %r" % (k, e))
procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
if sorted(procs.values()) != sorted(nodes):
    bad.append("process names %r, want %r" % (sorted(procs.values()), nodes))
lanes = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
for e in events:
    if e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
        bad.append("X with a bad dur: %r" % e)
flows = collections.defaultdict(lambda: {"s": [], "f": []})
for e in events:
    if e["ph"] in ("s", "f"):
        flows[(e["id"], e["cat"], e["name"])][e["ph"]].append(e)
for key, ends in flows.items():
    if len(ends["s"]) != 1 or len(ends["f"]) != 1:
        bad.append("flow %r: %d s, %d f" % (key, len(ends["s"]), len(ends["f"])))
        continue
    s, f = ends["s"][0], ends["f"][0]
    if s["pid"] != f["pid"] or f["ts"] < s["ts"] or f.get("bp") != "e":
        bad.append("flow %r: s %r, f %r" % (key, s, f))
if not any(k[1] == "msg" for k in flows):
    bad.append("no message flow")
for pid, node in procs.items():
    for name, lane in (("forward", "compute"), ("load", "load")):
        if not any(e["ph"] == "X" and e["pid"] == pid and e["name"] == name and lanes.get((pid, e["tid"])) == lane
                   for e in events):
            bad.append("node %s: no %s slice on the %s lane" % (node, name, lane))
for b in bad[:10]:
    print(b)
counts = collections.Counter(e["ph"] for e in events)
print("%d events %s, %d flows, %d problems" % (len(events), dict(sorted(counts.items())), len(flows), len(bad)))
sys.exit(1 if bad else 0)
PY
check "the timeline is valid Chrome trace JSON with matched flows and device slices" \
  timeout 60 python3 "$tmp/check.py" "$tmp/t.json" alpha beta

rc=0
timeout 60 "$ordo" trace timeline "$tmp/a.trace" "$tmp/plain.txt" -o "$tmp/u.json" >"$tmp/out" 2>"$tmp/err" || rc=$?
check "timeline of a file that is not a trace exits 2" test $rc -eq 2
check "timeline names the file that is not a trace" grep -q "plain.txt" "$tmp/err"
rc=0
timeout 60 "$ordo" trace timeline "$tmp/a.trace" -o "$tmp/no/such/dir/v.json" >"$tmp/out" 2>"$tmp/err" || rc=$?
check "timeline to a path it cannot write fails" test $rc -ne 0
check "timeline names the path it cannot write" grep -q "no/such/dir/v.json" "$tmp/err"

# --- hostile files (issue 35): bounded, one error line ------------------------------------------
mkdir -p "$tmp/hostile"
python3 - tests/data/golden.trace "$tmp/hostile" <<'PY'
import random, struct, sys
data = open(sys.argv[1], "rb").read()
out = sys.argv[2]
def records(b):  # (offset, size) of each framed record
    at, res = 0, []
    while at + 8 <= len(b):
        n = struct.unpack_from("<I", b, at)[0] + 1
        words = sum(struct.unpack_from("<%dI" % n, b, at + 4))
        size = 4 + 4 * n + (4 if n % 2 == 0 else 0) + 8 * words
        res.append((at, size))
        at += size
    return res
recs = records(data)
header = data[:recs[0][1]]
def write(name, b):
    open("%s/%s.trace" % (out, name), "wb").write(b)
# 72 bytes: one segment claiming 2^30 words (8 GiB), then the header's first 64 bytes
write("damaged-bomb", struct.pack("<II", 0, 1 << 30) + data[8:72])
# the header, then a record whose segment table claims 2^32 segments
write("damaged-segments", header + struct.pack("<II", 0xFFFFFFFF, 1) + bytes(64))
# the header, then a 1 MiB completion_request whose 1000 stop sequences all point at one list of
# 260,000 tokens: copied, 1 GiB
K, N = 1000, 260000
w = [5 << 32 | 4 << 48, 1, 0, 0, 0, 5 << 16, 0, 0, 0, 4 << 32 | 6 << 48, 0, 0, 0, 0]
ptrs = len(w)
w += [0] * 6
tag = len(w)
w[ptrs + 3] = 1 | (tag - ptrs - 4) << 2 | 7 << 32 | K << 35  # stop: K structs
w.append(K << 2 | 1 << 48)                                    # each 0 data words, 1 pointer
blob = tag + 1 + K
w += [1 | (blob - (tag + 1 + i) - 1) << 2 | 4 << 32 | N << 35 for i in range(K)]
w += [0] * (N // 2)
write("damaged-alias", header + struct.pack("<II", 0, len(w)) + b"".join(struct.pack("<Q", x) for x in w))
# single bit flips: a high bit of a record's segment size (64 MiB or more: damaged), then seeded
# offsets anywhere (damaged, or a record whose values changed)
for at, size in recs[:12]:
    for byte, bit in ((7, 5), (6, 7)):
        b = bytearray(data); b[at + byte] ^= 1 << bit
        write("damaged-size-%d-%d" % (at + byte, bit), bytes(b))
rng = random.Random(35)
for k in range(24):
    b = bytearray(data); at = rng.randrange(len(data)); b[at] ^= 1 << rng.randrange(8)
    write("flip-%d" % at, bytes(b))
PY
check "the hostile traces were written" test "$(ls "$tmp/hostile" | wc -l)" -eq 51

# bounded TOOL FILE: runs one trace tool on FILE under `timeout 5` (and a 4 GiB address-space cap,
# so a broken guard fails here instead of eating the machine); sets rc, kb (max RSS) and lines
# (stderr lines, stderr left in $tmp/herr).
bounded() {
  local tool=$1 f=$2 cmd
  case $tool in
    show) cmd=(trace show "$f") ;;
    timeline) cmd=(trace timeline "$f" -o "$tmp/hostile.json") ;;
    check) cmd=(trace check "$f") ;;
    replay) cmd=(replay "$f" --actor scheduler) ;;
    replay-node) cmd=(replay "$f" --node) ;;
  esac
  rc=0
  (ulimit -v 4194304; exec /usr/bin/time -f %M -o "$tmp/hrss" timeout -s KILL 5 "$ordo" "${cmd[@]}") \
    >"$tmp/hout" 2>"$tmp/herr" || rc=$?
  kb=$(tail -1 "$tmp/hrss")
  lines=$(grep -c '' "$tmp/herr" || true)
}
for f in "$tmp"/hostile/damaged-bomb.trace "$tmp"/hostile/damaged-segments.trace "$tmp"/hostile/damaged-alias.trace; do
  name=$(basename "$f" .trace)
  for tool in show timeline check replay replay-node; do
    bounded $tool "$f"
    check "$tool $name: exit 2 within 5 s (exit $rc)" test "$rc" -eq 2
    check "$tool $name: under 100 MB (max RSS $kb KB)" test "$kb" -lt 102400
    check "$tool $name: exactly one line on stderr ($lines)" test "$lines" -eq 1
    check "$tool $name: the line names the file" grep -qF "$f" "$tmp/herr"
  done
done
check "the 8 GiB segment table is refused as such" \
  grep -qF 'not a trace file (its first record: its segment table claims 8 GiB (1073741824 words; a record has at most 16 MiB))' \
  <("$ordo" trace show "$tmp/hostile/damaged-bomb.trace" 2>&1)
check "2^32 segments are refused naming the record and its byte" \
  grep -qE 'record 1 \(at byte [0-9]+\) is damaged: its segment table claims 4294967296 segments \(at most 512\)$' \
  <("$ordo" trace show "$tmp/hostile/damaged-segments.trace" 2>&1)
check "aliased pointers are refused naming the record and its byte" \
  grep -qE 'record 1 \(at byte [0-9]+\) is damaged: it does not decode: Exceeded message traversal limit' \
  <("$ordo" trace check "$tmp/hostile/damaged-alias.trace" 2>&1)

# Every flipped file, every tool: no crash, no hang, bounded memory, at most one stderr line; a
# flipped segment size (64 MiB or more) is damaged: exit 2 with exactly one line.
problems=0 runs=0
for f in "$tmp"/hostile/damaged-size-*.trace "$tmp"/hostile/flip-*.trace; do
  name=$(basename "$f" .trace)
  for tool in show timeline check replay; do
    bounded $tool "$f"
    runs=$((runs + 1))
    ok=1
    if [ "$rc" -gt 2 ] || [ "$kb" -ge 102400 ] || [ "$lines" -gt 1 ]; then ok=0; fi
    if [ "$rc" -eq 2 ] && [ "$lines" -ne 1 ]; then ok=0; fi
    case $name in damaged-*) if [ "$rc" -ne 2 ]; then ok=0; fi ;; esac
    if [ $ok -eq 0 ]; then
      problems=$((problems + 1))
      echo "$tool $name: exit $rc, $kb KB, $lines stderr lines: $(head -c 300 "$tmp/herr")"
    fi
  done
done
check "bit flips: $runs runs ended within 5 s under 100 MB with at most one error line ($problems did not)" \
  test "$problems" -eq 0

finish
