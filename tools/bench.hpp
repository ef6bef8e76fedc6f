// `ordo bench`: timings of the model and of the copy paths on the configured device, printed as a
// human table plus one `BENCH_JSON {...}` line for scripts (BENCHMARKS.md records the H200 runs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ordo {

struct bench_forward_options {
  std::string config_path = "configs/default.toml";
  std::vector<std::string> overrides;
  int32_t prompt_tokens = 512;
  int32_t decode_steps = 16;
  std::vector<int32_t> batches = {1}; // one run (and one BENCH_JSON line) per batch size, same model
  // > 0: the decode phase runs a second time from the same start with this many KV chunk saves in
  // every step (the batch's prompt chunks, in turn, into a pinned host arena), beside the decode
  // alone (issue 14: decode while saves run).
  int32_t save_chunks = 0;
};

// Prefill of `prompt_tokens` for each of `batch` requests (chunked by scheduler.max_batch_tokens),
// then `decode_steps` steps of one token per request, through the step executor; warmed up once
// per batch size. With save_chunks, the decode steps again from the prefill's end, each step
// also saving that many prompt chunks to host memory.
// Returns the process exit code (0 ok, 2 bad config or arguments, 1 failure).
int run_bench_forward(const bench_forward_options& options);

struct bench_matmul_options {
  std::string config_path = "configs/dense.toml";
  std::vector<std::string> overrides;
  std::vector<int32_t> rows = {1, 16, 512, 4096}; // x rows per call (decode batches, prefill tokens)
  int32_t repeats = 20;                            // launches per timing
};

// Each projection shape of the configured model in every matmul mode the device has (exact;
// tf32 and bf16 weights on a GPU): microseconds per call, TFLOP/s and weight GB/s, then one
// BENCH_JSON line. Returns the process exit code.
int run_bench_matmul(const bench_matmul_options& options);

struct bench_copy_options {
  std::string config_path = "configs/default.toml";
  std::vector<std::string> overrides;
  int32_t peak_mib = 256;  // size of the one large pinned copy
  int32_t units = 0;       // page units copied each way; 0 = cache.num_blocks
  int32_t repeats = 5;     // best of
};

// Peak of one large pinned host↔device copy each way, against the current page-unit path
// (one copy_async per field block). Returns the process exit code.
int run_bench_copy(const bench_copy_options& options);

struct bench_offload_options {
  std::string config_path = "configs/default.toml";
  std::vector<std::string> overrides;
  int32_t chunks = 32;  // chunk objects saved and loaded each way
  int32_t repeats = 5;  // best of
  bool store_server = true; // also through an `ordo store` process started for the run
};

// The host tier's offload path for the configured preset's KV pages, in rounds shaped like a
// node's engine steps: one store step per round (the previous round's commits or unpins with this
// round's reserves or pins: the commit computes the checksum, the pin verifies it), then per chunk
// object (cache.chunk_size / cache.block_size blocks at random distinct units of the arena) one
// segment-major gather kernel on the save stream, or one scatter on the load stream, and one
// synchronize. Against one plain pinned copy of the same bytes each way, and xxh64 alone.
// With store_server, the same rounds again through a store server in another process (started
// from this binary, control over CAF, bytes in its shared arena), in the same run.
int run_bench_offload(const bench_offload_options& options);

} // namespace ordo

#include <memory>

#include "messages/store.hpp"

namespace ordo {

class device;

// A store server process for `ordo bench offload` (tools/bench_store.cpp): started from this
// binary with an arena of at least `capacity_bytes`, one session opened by hello, its arena
// mapped and registered with `dev`. The destructor stops the process by its pid.
class bench_store_server {
public:
  virtual ~bench_store_server() = default;
  virtual uint8_t* arena() const = 0;
  virtual std::string name() const = 0; // its engine id and endpoint
  // One store step through the session; throws std::runtime_error on a refusal or no answer.
  virtual store_step_done step(store_step s) = 0;
};

std::unique_ptr<bench_store_server> start_bench_store_server(device& dev, uint64_t capacity_bytes,
                                                             uint64_t namespace_id);

} // namespace ordo

namespace ordo {

struct bench_trace_options {
  std::string config_path = "configs/default.toml";
  std::vector<std::string> overrides;
  int32_t rounds = 5;        // A/B pairs (recording off, then on), interleaved
  int32_t requests = 24;     // per run
  int32_t concurrency = 4;   // requests in flight at once
  int32_t prompt_tokens = 200;
  int32_t max_tokens = 16;
  std::string trace_dir = "/tmp";
};

// The cost of recording a trace (trace.path): the same workload through a fresh node with
// recording off and on, interleaved, `rounds` times; the median wall time of each, their ratio,
// and the bytes and records written per step. Returns the process exit code.
int run_bench_trace(const bench_trace_options& options);

} // namespace ordo

namespace ordo {

struct bench_pd_options {
  std::string config_path = "configs/dense.toml";
  std::vector<std::string> overrides; // applied to every node the bench starts
  std::vector<int32_t> prompt_tokens = {256, 1024, 2048};
  int32_t repeats = 3; // best (median) of this many requests per prompt length and path
};

// TTFT of prefill/decode disaggregation (docs/pd.md): real `ordo node` processes of this binary
// (a single reference node, a prefill node and a decode node), against the single node and
// against the transfer floor, in one run. Prints a table and a BENCH_JSON line; returns the exit
// code (tools/bench_pd.cpp).
int run_bench_pd(const bench_pd_options& options);

} // namespace ordo
