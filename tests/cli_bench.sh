#!/usr/bin/env bash
# `ordo bench` as a user runs it on the CPU device: a table and one parseable BENCH_JSON line.
set -u
ordo=${1:?usage: cli_bench.sh PATH_TO_ORDO}
source "$(dirname "$0")/check_lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
json() { sed -n 's/^BENCH_JSON //p' "$1"; }

"$ordo" bench forward --config configs/dense.toml --prompt-tokens 64 --decode-steps 4 >"$tmp/fwd" 2>"$tmp/err"
check "forward exits 0" test $? -eq 0
check "forward prints one BENCH_JSON line" test "$(grep -c '^BENCH_JSON {' "$tmp/fwd")" -eq 1
check "forward prints a table" grep -qE '^ +1 prefill +64 +1 ' "$tmp/fwd"
check "forward counts decode tokens" grep -q '"decode":{[^}]*"steps":4,"tokens":4' <(json "$tmp/fwd")
check "forward reports prefill tokens/s" grep -qE '"prefill":\{[^}]*"tokens":64,"tokens_per_s":[0-9.e+]+' <(json "$tmp/fwd")

# Two requests of 100 tokens with max_batch_tokens 64: the prefill is chunked into 4 steps.
"$ordo" bench forward --config configs/default.toml --set scheduler.max_batch_tokens=64 --prompt-tokens 100 \
  --decode-steps 2 --batch 2 >"$tmp/chunked" 2>"$tmp/err"
check "chunked forward exits 0" test $? -eq 0
check "chunked prefill takes 4 steps" grep -q '"prefill":{[^}]*"steps":4,"tokens":200' <(json "$tmp/chunked")

# Several batch sizes on one model: one table row pair and one BENCH_JSON line each.
"$ordo" bench forward --config configs/gdn_hybrid.toml --prompt-tokens 32 --decode-steps 2 --batch 1 3 >"$tmp/multi" 2>"$tmp/err"
check "multi-batch forward exits 0" test $? -eq 0
check "multi-batch prints a JSON line per batch" test "$(json "$tmp/multi" | grep -c '"batch":[13],')" -eq 2
check "batch 3 decodes 3 tokens a step" grep -q '"decode":{[^}]*"steps":2,"tokens":6' <(json "$tmp/multi" | grep '"batch":3')

# Decode while saves run: the decode steps three more times, every other step with two prompt-chunk saves.
"$ordo" bench forward --config configs/dense.toml --prompt-tokens 512 --decode-steps 3 --batch 2 --save-chunks 2 \
  >"$tmp/saving" 2>"$tmp/err"
check "forward with saves exits 0" test $? -eq 0
check "forward with saves prints the dec+save row" grep -qE '^ +2 dec\+save +6 +3 ' "$tmp/saving"
check "forward with saves reports both decodes and their ratio" python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["save_chunks_per_step"] == 2 and j["save_object_bytes"] > 0, j
assert j["decode"]["steps"] == 3 and j["decode_saving"]["steps"] == 3 and j["decode_saving"]["tokens"] == 6, j
assert j["save_rounds"] == 3 and j["decode_alternate"]["steps"] == 6, j
r = j["decode_saving_over_alone"]
assert abs(r - j["decode_saving"]["ms_per_step"] / j["decode_alternate"]["ms_per_step"]) < 1e-9, r
' < <(json "$tmp/saving")
"$ordo" bench forward --config configs/dense.toml --prompt-tokens 100 --save-chunks 1 >"$tmp/out" 2>"$tmp/err"
check "saves with a prompt shorter than a chunk exit 2" test $? -eq 2
check "the error names cache.chunk_size" grep -q "cache.chunk_size" "$tmp/err"

"$ordo" bench forward --config configs/dense.toml --batch 3 --prompt-tokens 4000 >"$tmp/out" 2>"$tmp/err"
check "a workload larger than the arena exits 2" test $? -eq 2
check "the error names cache.num_blocks" grep -q "cache.num_blocks" "$tmp/err"

# A Hugging Face checkpoint (model.path): read, built and timed like a preset, with the weights'
# footprint and the weight-streaming floor it is held to.
"$ordo" bench forward --config configs/qwen3_5_tiny.toml --prompt-tokens 40 --decode-steps 2 --batch 1 2 \
  >"$tmp/ck" 2>"$tmp/err"
check "forward on a checkpoint exits 0" test $? -eq 0
check "forward on a checkpoint prints the floor" grep -qE '^weights on the device [0-9.]+ GB .* floor [0-9.]+ ms per step' "$tmp/ck"
check "forward on a checkpoint reports it, its weights and the floor" python3 -c '
import json, sys
for line in sys.stdin.read().splitlines():
    j = json.loads(line)
    assert j["model"] == "tests/data/hf/qwen3_5_text" and j["preset"] == "checkpoint", j
    assert j["parameters"] > 0 and j["weight_bytes"] > j["embedding_bytes"] > 0, j
    assert j["device_copy_gbps"] > 0 and j["floor_ms"] > 0 and j["checkpoint_read_s"] >= 0, j
    assert j["prefill"]["tokens"] == 40 * j["batch"] and j["decode"]["tokens"] == 2 * j["batch"], j
' < <(json "$tmp/ck")
"$ordo" bench matmul --config configs/qwen3_5_tiny.toml --rows 1 >"$tmp/out" 2>"$tmp/err"
check "a bench of the presets only refuses model.path" test $? -eq 2
check "its error names model.path and the benches that take one" grep -q 'model.path.*ordo bench forward. and .copy' "$tmp/err"

# Every projection shape of the tiny dense model, at two row counts, exact only on the CPU device.
"$ordo" bench matmul --config configs/dense.toml --rows 1 40 --repeats 2 >"$tmp/mm" 2>"$tmp/err"
check "matmul exits 0" test $? -eq 0
check "matmul prints a table row per shape and row count" grep -qE '^exact +40 +[0-9]+ +[0-9]+ +[0-9.]+ ' "$tmp/mm"
check "matmul times each shape of the model once per row count" python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
rows = j["rows"]
assert j["bench"] == "matmul" and j["repeats"] == 2, j
shapes = {(r["in"], r["out"]) for r in rows}
assert len(shapes) >= 3 and len(rows) == 2 * len(shapes), rows
assert {r["mode"] for r in rows} == {"exact"} and {r["rows"] for r in rows} == {1, 40}, rows
assert all(r["us"] > 0 and r["tflops"] > 0 for r in rows), rows
' < <(json "$tmp/mm")
"$ordo" bench matmul --config configs/dense.toml --rows 0 >"$tmp/out" 2>"$tmp/err"
check "matmul with --rows 0 exits 2" test $? -eq 2
check "the error names --rows" grep -q -- "--rows must be in 1..65536" "$tmp/err"

"$ordo" bench copy --config configs/default.toml >"$tmp/copy" 2>"$tmp/err"
check "copy exits 0" test $? -eq 0
check "copy prints one BENCH_JSON line" test "$(grep -c '^BENCH_JSON {' "$tmp/copy")" -eq 1
check "copy reports both directions against the peak" \
  grep -qE '"units_d2h_of_peak":[0-9.e+-]+.*"units_h2d_of_peak":[0-9.e+-]+' <(json "$tmp/copy")
check "copy makes one copy per field block" grep -q '"unit_copies":2048' <(json "$tmp/copy")

"$ordo" bench offload --config configs/default.toml --chunks 4 --repeats 2 >"$tmp/offload" 2>"$tmp/err"
check "offload exits 0" test $? -eq 0
check "offload prints one BENCH_JSON line" test "$(grep -c '^BENCH_JSON {' "$tmp/offload")" -eq 1
check "offload's JSON names the bench" grep -q '"bench":"offload"' <(json "$tmp/offload")
check "offload reports both paths against the plain copy" \
  grep -qE '"load_ratio":[0-9.e+-]+.*"save_ratio":[0-9.e+-]+' <(json "$tmp/offload")
check "offload reports the host-hashing paths beside the summing ones" \
  grep -qE '"load_host_checksum_gbps":[0-9.e+-]+.*"save_host_checksum_gbps":[0-9.e+-]+' <(json "$tmp/offload")
check "offload reports the copy kernels alone beside the plain copies" \
  grep -qE '"gather_alone_gbps":[0-9.e+-]+.*"scatter_alone_gbps":[0-9.e+-]+,"scatter_staged_alone_gbps":[0-9.e+-]+' <(json "$tmp/offload")
check "offload reports loads whose scatter reads host memory beside the staged ones" \
  grep -qE '"load_direct_ratio":[0-9.e+-]+' <(json "$tmp/offload")
check "offload saves 4 chunks of 4 blocks" grep -q '"blocks_per_chunk":4,.*"chunks":4,' <(json "$tmp/offload")
check "offload also runs through a store server process, against the in-process tier" \
  grep -qE '"store_load_of_in_process":[0-9.e+-]+.*"store_save_of_in_process":[0-9.e+-]+' <(json "$tmp/offload")
store_pid=$(sed -n 's/^store server: .*, pid \([0-9]*\)$/\1/p' "$tmp/offload")
check "the bench names the store server's pid" test -n "$store_pid"
check "the store server process is gone after the bench" test ! -e "/proc/${store_pid:-0}"
"$ordo" bench offload --config configs/default.toml --chunks 4 --repeats 2 --no-store-server >"$tmp/offload" 2>"$tmp/err"
check "--no-store-server skips that path" test "$(grep -c store_save "$tmp/offload")" -eq 0

"$ordo" bench offload --config configs/default.toml --chunks 1000 >"$tmp/out" 2>"$tmp/err"
check "offload of more chunks than the arena holds exits 2" test $? -eq 2
check "the offload error names cache.num_blocks" grep -q "cache.num_blocks" "$tmp/err"

"$ordo" bench copy --config configs/default.toml --set cache.block_size=48 >"$tmp/out" 2>"$tmp/err"
check "invalid config exits 2" test $? -eq 2

# P/D TTFT: three `ordo node` children (reference, prefill, decode); every decode must come from the
# prefill node with the reference's digest, or the bench exits 1.
"$ordo" bench pd --config configs/dense.toml --prompt-tokens 64 300 --repeats 1 >"$tmp/pd" 2>"$tmp/err"
check "pd exits 0" test $? -eq 0
check "pd prints its table header" \
  grep -qE '^ +tokens +single ms +prefill ms +decode ms +P/D ms +P/D/single +decode-only +pulled MB +from peer +floor ms' "$tmp/pd"
check "pd prints one row per prompt length" test "$(grep -cE '^ +(64|300) +[0-9.]+ ' "$tmp/pd")" -eq 2
check "pd prints one BENCH_JSON line" test "$(grep -c '^BENCH_JSON {' "$tmp/pd")" -eq 1
check "pd's BENCH_JSON parses, with every key, from.peer > 0 and bytes pulled" python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["bench"] == "pd" and j["preset"] == "dense" and j["repeats"] == 1, j
assert [r["prompt_tokens"] for r in j["rows"]] == [64, 300], j["rows"]
keys = {"single_ms", "prefill_ms", "decode_ms", "pd_ms", "pd_over_single", "decode_only_ms", "bytes_pulled",
        "from_peer", "resume_at", "floor_ms", "copy_gbps", "decode_over_floor", "digest"}
for r in j["rows"]:
    assert keys <= r.keys(), keys - r.keys()
    assert r["from_peer"] > 0 and r["bytes_pulled"] > 0 and r["floor_ms"] > 0 and r["pd_ms"] > 0, r
' < <(json "$tmp/pd")
pd_pids=$(sed -n 's/^nodes: reference pid \([0-9]*\) .*, prefill pid \([0-9]*\) .*, decode pid \([0-9]*\) .*/\1 \2 \3/p' "$tmp/pd")
check "pd names its three nodes' pids" test "$(echo $pd_pids | wc -w)" -eq 3
for p in $pd_pids; do
  check "node pid $p is gone after the bench" test ! -e "/proc/$p"
done
# A P/D node that cannot start: TLS on with a certificate that is not there (an actor port beyond
# loopback without TLS is refused before it could fail to bind).
"$ordo" bench pd --config configs/dense.toml --set security.tls=on --set security.certificate="$tmp/none.crt" \
  --set security.key="$tmp/none.key" --set security.cafile="$tmp/none.crt" --prompt-tokens 64 --repeats 1 \
  >"$tmp/out" 2>"$tmp/err"
check "pd with a node that cannot start exits 1" test $? -eq 1
check "pd prints that node's stderr" grep -q "security.certificate = $tmp/none.crt: cannot read it" "$tmp/err"
# 10 tokens hold no full block of 16: nothing to transfer, so the decode node recomputes.
"$ordo" bench pd --config configs/dense.toml --prompt-tokens 10 --repeats 1 >"$tmp/out" 2>"$tmp/err"
check "pd whose decode took nothing from the prefill node exits 1" test $? -eq 1
check "pd names the prompt length and from.peer = 0" grep -q "prompt of 10 tokens: .*from.peer = 0" "$tmp/err"
check "pd prints no BENCH_JSON line for a failed run" test "$(grep -c '^BENCH_JSON' "$tmp/out")" -eq 0

finish
