#!/usr/bin/env bash
# `ordo replay`: a recorded offload run (hybrid model, HBM evicted between passes, chaos on)
# replays identically actor by actor and node-wide; a changed setting is named where the
# decisions first part; bad input is refused naming it.
set -u
ordo=${1:?usage: cli_replay.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

timeout 300 "$ordo" demo --config configs/offload.toml --set device.chaos_seed=5 --trace "$tmp/run.trace" \
  >"$tmp/demo" 2>&1
check "the recorded demo passes" grep -q "pass-2 digests equal to the cold run: 9 of 9" "$tmp/demo"

for actor in scheduler block_pool connector store; do
  timeout 120 "$ordo" replay "$tmp/run.trace" --actor $actor >"$tmp/$actor" 2>&1
  check "$actor replays identically (exit 0)" test $? -eq 0
  check "$actor says identical" grep -Eq "^replayed [1-9][0-9]* events of $actor: identical" "$tmp/$actor"
done

timeout 300 "$ordo" replay "$tmp/run.trace" --node >"$tmp/node" 2>&1
check "--node reproduces every digest (exit 0)" test $? -eq 0
check "--node compared 18 requests" grep -q "^replayed 18 requests into a fresh node: every logits digest identical" \
  "$tmp/node"

# Another setting: without checkpoints the scheduler plans no state images, so its pool steps part.
timeout 120 "$ordo" replay "$tmp/run.trace" --actor scheduler --set cache.checkpoint_interval=0 >"$tmp/what_if" 2>&1
check "a changed setting diverges (exit 1)" test $? -eq 1
check "the divergence names the record, kind and field" grep -Eq "DIVERGED at record [0-9]+ \(pool_step\): first differing field grows" "$tmp/what_if"
check "the divergence shows both versions" grep -q "replayed:" "$tmp/what_if"

# A file cut short replays up to its last whole record.
size=$(stat -c %s "$tmp/run.trace")
# (three bytes of a next record's frame header follow, so the cut never falls between two records)
{ head -c $((size * 2 / 3)) "$tmp/run.trace"; printf '\001\000\000'; } >"$tmp/cut.trace"
timeout 120 "$ordo" replay "$tmp/cut.trace" --actor block_pool >"$tmp/cut" 2>&1
check "a cut file replays (exit 0)" test $? -eq 0
check "a cut file says so" grep -q "file cut short" "$tmp/cut"

timeout 20 "$ordo" replay "$tmp/run.trace" --actor frontend >"$tmp/bad" 2>&1
check "an unknown actor exits 2" test $? -eq 2
check "an unknown actor is named" grep -q -- "--actor frontend: must be scheduler, block_pool, connector or store" "$tmp/bad"
echo "not a trace" >"$tmp/junk"
timeout 20 "$ordo" replay "$tmp/junk" --actor store >"$tmp/bad" 2>&1
check "a non-trace file exits 2" test $? -eq 2
check "a non-trace file is named" grep -q "$tmp/junk" "$tmp/bad"
timeout 20 "$ordo" replay "$tmp/run.trace" >"$tmp/bad" 2>&1
check "neither --actor nor --node exits 2" test $? -eq 2
timeout 60 "$ordo" node --config configs/default.toml --port 0 --trace "$tmp/no/such/dir/x.trace" >"$tmp/out" 2>"$tmp/bad"
check "an unwritable trace path stops the node (exit 1)" test $? -eq 1
check "an unwritable trace path is named" grep -q "trace.path = \"$tmp/no/such/dir/x.trace\": cannot create it" "$tmp/bad"
finish
