#include "tools/bench.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <functional>
#include <optional>
#include <numeric>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "kernels/cpu/dtype.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/object_checksum.hpp"
#include "runtime/checksum.hpp"
#include "runtime/config.hpp"
#include "runtime/device_registry.hpp"
#include "runtime/host_store.hpp"
#include "runtime/kv_codec.hpp"
#include "runtime/layouts.hpp"
#include "runtime/model_presets.hpp"
#include "runtime/models/hf_model.hpp"
#include "runtime/step_executor.hpp"

namespace ordo {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}


// Runs one step and blocks until its completion callback (one step in flight, as in the runner).
step_done run_step(step_executor& exec, const step_plan& plan) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  step_done result;
  exec.execute(plan, [&](step_done d) {
    std::lock_guard<std::mutex> lock(m);
    result = std::move(d);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return done; });
  return result;
}

struct phase_result {
  int64_t tokens = 0;
  int32_t steps = 0;
  double seconds = 0.0;
  double device_ms = 0.0; // sum of the executor's enqueue→completion times
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0; }
  double ms_per_step() const { return steps > 0 ? seconds * 1e3 / steps : 0.0; }
  nlohmann::json to_json() const {
    return {{"tokens", tokens},          {"steps", steps},
            {"seconds", seconds},        {"tokens_per_s", tokens_per_s()},
            {"ms_per_step", ms_per_step()}, {"device_ms_sum", device_ms}};
  }
};

// The workload: `batch` requests of `prompt` tokens each, every request owning the blocks of
// prompt + decode tokens, laid out one after another in the arena.
struct forward_workload {
  int32_t batch = 1, prompt = 0, decode = 0, block_size = 16, max_batch_tokens = 512, max_num_seqs = 16;
  int32_t blocks_per_req = 0;
  bool has_state = false;

  scheduled_request request(int32_t r) const {
    scheduled_request s;
    s.request_id = static_cast<uint64_t>(r) + 1;
    s.state_slot = has_state ? r : -1;
    for (int32_t b = 0; b < blocks_per_req; ++b)
      s.block_table.push_back(r * blocks_per_req + b);
    s.seed = static_cast<uint64_t>(r);
    return s;
  }
  static int32_t prompt_token(int32_t r, int32_t i) { return (i * 7 + r * 13 + 32) % 256; }
};

phase_result run_prefill(step_executor& exec, const forward_workload& w, std::vector<int32_t>& last_token) {
  phase_result res;
  std::vector<int32_t> progress(static_cast<size_t>(w.batch), 0);
  auto t0 = clock_type::now();
  for (;;) {
    step_plan plan;
    plan.header.seq = static_cast<uint64_t>(res.steps) + 1;
    int32_t budget = w.max_batch_tokens;
    for (int32_t r = 0; r < w.batch && budget > 0 && static_cast<int32_t>(plan.requests.size()) < w.max_num_seqs;
         ++r) {
      int32_t done = progress[static_cast<size_t>(r)];
      if (done >= w.prompt)
        continue;
      int32_t take = std::min(w.prompt - done, budget);
      auto s = w.request(r);
      s.first_position = done;
      s.reset_state = done == 0;
      for (int32_t i = done; i < done + take; ++i)
        s.token_ids.push_back(forward_workload::prompt_token(r, i));
      s.sample = done + take == w.prompt;
      progress[static_cast<size_t>(r)] += take;
      budget -= take;
      res.tokens += take;
      plan.requests.push_back(std::move(s));
    }
    if (plan.requests.empty())
      break;
    auto d = run_step(exec, plan);
    res.device_ms += d.device_ms;
    ++res.steps;
    for (const auto& s : d.samples)
      last_token[static_cast<size_t>(s.request_id - 1)] = s.token_id;
  }
  res.seconds = seconds_since(t0);
  return res;
}

// Step numbers (command_header::seq) of each phase of `bench forward`, so that the steps of a
// recorded run tell their phase: prefill from 1, decode from decode_seq, the untimed step that
// warms the saves at warm_save_seq, and round r of decode with saves from saving_seq + r · round_seqs.
constexpr uint64_t decode_seq = 1000000, warm_save_seq = 1900000, saving_seq = 2000000, round_seqs = 10000;

// Rounds of `bench forward --save-chunks`: each runs the decode steps again from the prefill's
// end, every other step carrying saves (run_decode_interleaved).
constexpr int32_t save_rounds = 3;

// KV chunk saves for the decode steps: step s saves `per_step` of the batch's full prompt chunks
// (request r's chunk c, in turn) into a ring of chunk objects in the host arena. The chunks'
// blocks hold KV the prefill computed, and no decode step writes them.
struct save_rotation {
  int32_t per_step = 0, blocks_per_chunk = 0, chunks_per_request = 0, ring = 0;
  uint64_t object_bytes = 0;

  void add(step_plan& plan, const forward_workload& w, int32_t step) const {
    for (int32_t k = 0; k < per_step; ++k) {
      const int32_t n = step * per_step + k, r = (n / chunks_per_request) % w.batch, c = n % chunks_per_request;
      unit_transfer t;
      t.request_id = static_cast<uint64_t>(r) + 1;
      t.kind = static_cast<uint8_t>(object_kind::kv_chunk);
      t.data_offset = static_cast<uint64_t>(n % ring) * object_bytes;
      t.data_bytes = object_bytes;
      const auto table = w.request(r).block_table;
      t.units.assign(table.begin() + c * blocks_per_chunk, table.begin() + (c + 1) * blocks_per_chunk);
      plan.saves.push_back(std::move(t));
    }
  }
};

// Decode step `step` of the batch: one token per request (its last sampled one), sampled again.
step_plan decode_plan(const forward_workload& w, int32_t step, const std::vector<int32_t>& last_token, uint64_t seq) {
  step_plan plan;
  plan.header.seq = seq;
  for (int32_t r = 0; r < w.batch; ++r) {
    auto s = w.request(r);
    s.first_position = w.prompt + step;
    s.token_ids = {last_token[static_cast<size_t>(r)]};
    s.sample = true;
    plan.requests.push_back(std::move(s));
  }
  return plan;
}

// Runs decode step `plan`, counts it into `into` (all but its time) and takes each request's
// sampled token into last_token.
void decode_step(step_executor& exec, const forward_workload& w, const step_plan& plan,
                 std::vector<int32_t>& last_token, phase_result& into) {
  auto d = run_step(exec, plan);
  into.device_ms += d.device_ms;
  into.tokens += w.batch;
  ++into.steps;
  for (const auto& s : d.samples)
    last_token[static_cast<size_t>(s.request_id - 1)] = s.token_id;
}

phase_result run_decode(step_executor& exec, const forward_workload& w, std::vector<int32_t> last_token) {
  phase_result res;
  auto t0 = clock_type::now();
  for (int32_t step = 0; step < w.decode; ++step)
    decode_step(exec, w, decode_plan(w, step, last_token, decode_seq + static_cast<uint64_t>(step)), last_token, res);
  res.seconds = seconds_since(t0);
  return res;
}

// The decode steps `rounds` times from the prefill's end, odd steps also saving chunks: the steps
// with saves and the steps without alternate, so a slow stretch of the machine falls on both.
// Returns {steps without saves, steps with saves}, each summing its own steps' wall time.
std::pair<phase_result, phase_result> run_decode_interleaved(step_executor& exec, const forward_workload& w,
                                                             const std::vector<int32_t>& from,
                                                             const save_rotation& saves, int32_t rounds) {
  phase_result alone, saving;
  int32_t saving_steps = 0;
  for (int32_t round = 0; round < rounds; ++round) {
    std::vector<int32_t> last_token = from;
    for (int32_t step = 0; step < w.decode; ++step) {
      step_plan plan =
          decode_plan(w, step, last_token, saving_seq + static_cast<uint64_t>(round) * round_seqs + static_cast<uint64_t>(step));
      const bool with_saves = step % 2 == 1;
      if (with_saves)
        saves.add(plan, w, saving_steps++);
      phase_result& into = with_saves ? saving : alone;
      auto t0 = clock_type::now();
      decode_step(exec, w, plan, last_token, into);
      into.seconds += seconds_since(t0);
    }
  }
  return {alone, saving};
}

// One short prefill chunk and one decode-shaped step, so first-launch costs stay out of the timing.
void warm_up(step_executor& exec, const forward_workload& w) {
  step_plan plan;
  auto s = w.request(0);
  s.reset_state = true;
  for (int32_t i = 0; i < std::min(w.prompt, w.max_batch_tokens); ++i)
    s.token_ids.push_back(forward_workload::prompt_token(0, i));
  s.sample = true;
  plan.requests.push_back(s);
  run_step(exec, plan);
  step_plan decode;
  decode.header.seq = 1;
  for (int32_t r = 0; r < w.batch; ++r) {
    auto d = w.request(r);
    d.reset_state = true;
    d.token_ids = {forward_workload::prompt_token(r, 0)};
    d.sample = true;
    decode.requests.push_back(std::move(d));
  }
  run_step(exec, decode);
}

// `checkpoints`: the bench takes model.path too (forward builds the checkpoint's model, copy lays
// out its arena); the others size their buffers from the preset's dims and refuse it.
bool load_bench_config(const std::string& path, const std::vector<std::string>& sets, node_config& cfg,
                       bool checkpoints = false) {
  try {
    cfg = load_config_file(path, sets);
  } catch (const std::exception& e) {
    std::cerr << "ordo bench: invalid config: " << e.what() << "\n";
    return false;
  }
  if (!cfg.model_path.empty() && !checkpoints) {
    std::cerr << "ordo bench: model.path = \"" << cfg.model_path
              << "\": this bench runs the seeded presets only (`ordo bench forward` and `copy` take a checkpoint); leave "
                 "model.path out\n";
    return false;
  }
  return true;
}

// Best-of-`repeats` seconds of `enqueue` followed by a device synchronize.
template <class Fn>
double best_time(device& dev, int32_t repeats, Fn&& enqueue) {
  double best = 1e30;
  for (int32_t i = 0; i < std::max(repeats, 1); ++i) {
    dev.synchronize();
    auto t0 = clock_type::now();
    enqueue();
    dev.synchronize();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

double gbps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0.0; }

// The device memory's bandwidth as a device-to-device copy of 512 MiB sees it (best of 5; a copy
// reads and writes every byte, so 2 × bytes / time): the rate a step can stream weights at.
double device_copy_gbps(device& dev) {
  constexpr size_t bytes = size_t{512} << 20;
  void* a = dev.alloc_device(bytes);
  void* b = dev.alloc_device(bytes);
  dev.fill_async(stream_kind::compute, a, 1, bytes);
  dev.copy_async(stream_kind::compute, b, a, bytes); // warm-up
  const double s = best_time(dev, 5, [&] { dev.copy_async(stream_kind::compute, b, a, bytes); });
  dev.free_device(a);
  dev.free_device(b);
  return gbps(2.0 * bytes, s);
}

} // namespace

int run_bench_forward(const bench_forward_options& o) {
  spdlog::set_level(spdlog::level::warn);
  node_config cfg;
  if (!load_bench_config(o.config_path, o.overrides, cfg, true))
    return 2;
  model_options model_opts;
  const auto t_read = clock_type::now();
  try {
    model_opts = load_model_options(cfg); // reads and checks model.path's checkpoint, if any
  } catch (const std::exception& e) {
    std::cerr << "ordo bench forward: " << e.what() << "\n";
    return 2;
  }
  const double read_s = seconds_since(t_read);
  const model_dims dims = dims_of(model_opts);
  const std::string model_name =
      cfg.model_path.empty() ? std::string(to_string(cfg.preset)) + "/" + to_string(cfg.size) : cfg.model_path;
  const int32_t blocks_per_req = (o.prompt_tokens + o.decode_steps + cfg.block_size - 1) / cfg.block_size;
  std::string why;
  if (o.batches.empty())
    why = "--batch needs at least one value";
  else if (o.prompt_tokens < 1 || o.decode_steps < 0)
    why = "--prompt-tokens must be >= 1, --decode-steps >= 0";
  else if (o.save_chunks < 0 || (o.save_chunks > 0 && o.prompt_tokens < cfg.chunk_size))
    why = "--save-chunks must be >= 0, and saves need --prompt-tokens of at least one chunk (cache.chunk_size = " +
          std::to_string(cfg.chunk_size) + ")";
  else if (o.prompt_tokens + o.decode_steps > dims.max_context)
    why = "prompt + decode = " + std::to_string(o.prompt_tokens + o.decode_steps) + " exceeds the context of " +
          std::to_string(dims.max_context);
  for (auto batch : o.batches) {
    if (!why.empty())
      break;
    if (batch < 1)
      why = "--batch must be >= 1";
    else if (batch > cfg.max_num_seqs)
      why = "--batch " + std::to_string(batch) + " exceeds scheduler.max_num_seqs = " + std::to_string(cfg.max_num_seqs);
    else if (batch > model_opts.max_state_slots)
      why = "--batch " + std::to_string(batch) + " exceeds the model's " + std::to_string(model_opts.max_state_slots) +
            " state slots";
    else if (static_cast<int64_t>(blocks_per_req) * batch > cfg.num_blocks)
      why = "the workload needs " + std::to_string(static_cast<int64_t>(blocks_per_req) * batch) +
            " blocks; set cache.num_blocks (now " + std::to_string(cfg.num_blocks) + ") at least that high";
  }
  if (!why.empty()) {
    std::cerr << "ordo bench forward: " << why << "\n";
    return 2;
  }
  try {
    auto dev = make_configured_device(cfg);
    auto t_build = clock_type::now();
    model mdl(model_opts, *dev);
    double build_s = seconds_since(t_build);
    model_opts.checkpoint.reset(); // its host copy of the weights, now on the device
    // The weight-streaming floor of one step: every weight but the embedding table (read by rows)
    // at the device's copy bandwidth. A decode step cannot be faster; prefill is compute-bound.
    const weight_footprint weights = mdl.weights();
    const double copy_gbps = device_copy_gbps(*dev);
    const double streamed = static_cast<double>(weights.bytes - weights.embedding_bytes);
    const double floor_ms = copy_gbps > 0 ? streamed / (copy_gbps * 1e9) * 1e3 : 0.0;
    step_executor_options exec_opts;
    exec_opts.max_batch_tokens = cfg.max_batch_tokens;
    exec_opts.max_num_seqs = cfg.max_num_seqs;
    save_rotation rotation;
    std::unique_ptr<uint8_t, std::function<void(uint8_t*)>> host_arena;
    if (o.save_chunks > 0) {
      rotation.per_step = o.save_chunks;
      rotation.blocks_per_chunk = cfg.chunk_size / cfg.block_size;
      rotation.chunks_per_request = o.prompt_tokens / cfg.chunk_size;
      rotation.ring = 2 * o.save_chunks;
      rotation.object_bytes = kv_chunk_object_bytes(mdl.kv_fields(), rotation.blocks_per_chunk);
      exec_opts.host_arena_bytes = static_cast<size_t>(rotation.ring) * rotation.object_bytes;
      host_arena = {static_cast<uint8_t*>(dev->alloc_host_pinned(exec_opts.host_arena_bytes)),
                    [&dev](uint8_t* p) { dev->free_host_pinned(p); }};
      std::memset(host_arena.get(), 0, exec_opts.host_arena_bytes); // first touch out of the timing
      exec_opts.host_arena = host_arena.get();
    }
    step_executor exec(*dev, mdl, exec_opts);

    std::printf("ordo bench forward: %s kv %s weights %s matmul %s on %s | prompt %d tokens, decode %d steps, "
                "max_batch_tokens %d, block %d | %.4gM parameters; checkpoint read in %.1f s, model built in %.1f s\n",
                model_name.c_str(), to_string(cfg.kv), to_string(model_opts.weights),
                model_opts.weights == weight_dtype::bf16 ? "bf16" : to_string(model_opts.matmul),
                dev->name().c_str(), o.prompt_tokens, o.decode_steps, cfg.max_batch_tokens, cfg.block_size,
                static_cast<double>(parameter_count(dims)) / 1e6, read_s, build_s);
    std::printf("weights on the device %.2f GB (embedding table %.2f GB, read by rows); device copy %.0f GB/s; "
                "floor %.3f ms per step (%.2f GB streamed)\n",
                static_cast<double>(weights.bytes) / 1e9, static_cast<double>(weights.embedding_bytes) / 1e9,
                copy_gbps, floor_ms, streamed / 1e9);
    std::printf("%5s %-8s %8s %6s %11s %12s %10s %8s\n", "batch", "phase", "tokens", "steps", "wall ms", "tokens/s",
                "ms/step", "÷ floor");
    for (auto batch : o.batches) {
      forward_workload w;
      w.batch = batch, w.prompt = o.prompt_tokens, w.decode = o.decode_steps;
      w.block_size = cfg.block_size, w.max_batch_tokens = cfg.max_batch_tokens, w.max_num_seqs = cfg.max_num_seqs;
      w.blocks_per_req = blocks_per_req;
      w.has_state = mdl.geometry().has_recurrent_state;
      warm_up(exec, w);
      dev->synchronize();
      std::vector<int32_t> last_token(static_cast<size_t>(w.batch), 0);
      auto prefill = run_prefill(exec, w, last_token);
      dev->synchronize();
      auto decode = run_decode(exec, w, last_token);
      dev->synchronize();
      // Decode while saves run: the decode steps again, every other step saving chunks.
      std::optional<std::pair<phase_result, phase_result>> saves;
      if (o.save_chunks > 0) {
        // One untimed step with saves first: a device's first save may set up buffers.
        step_plan first = decode_plan(w, 0, last_token, warm_save_seq);
        rotation.add(first, w, 0);
        run_step(exec, first);
        saves = run_decode_interleaved(exec, w, last_token, rotation, save_rounds);
        dev->synchronize();
      }
      std::vector<std::pair<const char*, const phase_result*>> rows = {{"prefill", &prefill}, {"decode", &decode}};
      if (saves) {
        rows.push_back({"dec/alt", &saves->first});
        rows.push_back({"dec+save", &saves->second});
      }
      for (auto [name, p] : rows)
        std::printf("%5d %-8s %8lld %6d %11.1f %12.1f %10.2f %8.2f\n", batch, name, static_cast<long long>(p->tokens),
                    p->steps, p->seconds * 1e3, p->tokens_per_s(), p->ms_per_step(),
                    floor_ms > 0 ? p->ms_per_step() / floor_ms : 0.0);
      if (saves)
        std::printf("%5d saves: %d chunk(s) of %.2f MB per step; decode with saves / alone = %.3f (%d rounds, "
                    "steps with and without saves alternating)\n",
                    batch, o.save_chunks, static_cast<double>(rotation.object_bytes) / 1e6,
                    saves->second.ms_per_step() / saves->first.ms_per_step(), save_rounds);
      // The JSON line right after its rows, so a run cut short still leaves every finished batch.
      nlohmann::json j = {{"bench", "forward"},
                          {"model", model_name},
                          {"preset", cfg.model_path.empty() ? to_string(cfg.preset) : "checkpoint"},
                          {"size", cfg.model_path.empty() ? to_string(cfg.size) : "checkpoint"},
                          {"parameters", parameter_count(dims)},
                          {"kv_dtype", to_string(cfg.kv)},
                          {"weight_dtype", to_string(model_opts.weights)},
                          {"matmul", model_opts.weights == weight_dtype::bf16 ? "bf16" : to_string(model_opts.matmul)},
                          {"device", dev->name()},
                          {"prompt_tokens", w.prompt},
                          {"decode_steps", w.decode},
                          {"batch", w.batch},
                          {"max_batch_tokens", w.max_batch_tokens},
                          {"block_size", w.block_size},
                          {"checkpoint_read_s", read_s},
                          {"model_build_s", build_s},
                          {"weight_bytes", weights.bytes},
                          {"embedding_bytes", weights.embedding_bytes},
                          {"device_copy_gbps", copy_gbps},
                          {"floor_ms", floor_ms},
                          {"prefill", prefill.to_json()},
                          {"decode", decode.to_json()}};
      if (saves) {
        j["save_chunks_per_step"] = o.save_chunks;
        j["save_object_bytes"] = rotation.object_bytes;
        j["decode_saving"] = saves->second.to_json();
        j["decode_alternate"] = saves->first.to_json();
        j["decode_saving_over_alone"] = saves->second.ms_per_step() / saves->first.ms_per_step();
        j["save_rounds"] = save_rounds;
      }
      std::printf("BENCH_JSON %s\n", j.dump().c_str());
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ordo bench forward: " << e.what() << "\n";
    return 1;
  }
}

int run_bench_matmul(const bench_matmul_options& o) {
  spdlog::set_level(spdlog::level::warn);
  node_config cfg;
  if (!load_bench_config(o.config_path, o.overrides, cfg))
    return 2;
  std::string why;
  if (o.rows.empty())
    why = "--rows needs at least one row count";
  for (auto r : o.rows)
    if (r < 1 || r > 65536)
      why = "--rows must be in 1..65536 (got " + std::to_string(r) + ")";
  if (o.repeats < 1 || o.repeats > 10000)
    why = "--repeats must be in 1..10000";
  if (!why.empty()) {
    std::cerr << "ordo bench matmul: " << why << "\n";
    return 2;
  }
  try {
    auto dev = make_configured_device(cfg);
    const model_dims dims = dims_of(cfg.preset, cfg.size);
    // The distinct projection shapes of the model (in → out), in the order a layer runs them.
    std::vector<std::pair<int32_t, int32_t>> shapes;
    auto add_shape = [&](int32_t in, int32_t out) {
      if (in > 0 && out > 0 && std::find(shapes.begin(), shapes.end(), std::make_pair(in, out)) == shapes.end())
        shapes.emplace_back(in, out);
    };
    add_shape(dims.d_model, dims.q_dim());
    add_shape(dims.d_model, dims.kv_dim());
    add_shape(dims.q_dim(), dims.d_model);
    add_shape(dims.d_model, dims.mlp_dim);
    add_shape(dims.mlp_dim, dims.d_model);
    struct mode {
      const char* name;
      kernel_options opts;
    };
    std::vector<mode> modes = {{"exact", {matmul_mode::exact, weight_dtype::fp32}}};
    if (cfg.device_kind == device_kind::hip) {
      modes.push_back({"tf32", {matmul_mode::tf32, weight_dtype::fp32}});
      modes.push_back({"bf16", {matmul_mode::exact, weight_dtype::bf16}});
    }
    const int32_t max_rows = *std::max_element(o.rows.begin(), o.rows.end());
    std::printf("ordo bench matmul: %s/%s on %s | y = x·Wᵀ, %d launches per timing, best of 3\n",
                to_string(cfg.preset), to_string(cfg.size), dev->name().c_str(), o.repeats);
    std::printf("%-6s %6s %6s %6s %11s %9s %10s\n", "mode", "rows", "in", "out", "us/call", "TFLOP/s", "W GB/s");
    nlohmann::json rows_json = nlohmann::json::array();
    std::mt19937 gen(17);
    auto floats = [&](size_t n, float lo, float hi) {
      std::uniform_real_distribution<float> u(lo, hi);
      std::vector<float> v(n);
      for (auto& e : v) e = u(gen);
      return v;
    };
    for (auto [in, out] : shapes) {
      std::vector<float> x = floats(static_cast<size_t>(max_rows) * in, -1, 1);
      std::vector<float> w = floats(static_cast<size_t>(out) * in, -0.05f, 0.05f);
      std::vector<uint16_t> wb(w.size());
      for (size_t i = 0; i < w.size(); ++i) wb[i] = cpu::float_to_bf16(w[i]);
      auto upload = [&](const void* src, size_t bytes) {
        void* d = dev->alloc_device(bytes);
        dev->copy_async(stream_kind::load, d, src, bytes);
        return d;
      };
      auto* xd = static_cast<float*>(upload(x.data(), x.size() * sizeof(float)));
      auto* wd = static_cast<float*>(upload(w.data(), w.size() * sizeof(float)));
      auto* wbd = static_cast<uint16_t*>(upload(wb.data(), wb.size() * sizeof(uint16_t)));
      auto* yd = static_cast<float*>(dev->alloc_device(static_cast<size_t>(max_rows) * out * sizeof(float)));
      dev->synchronize();
      for (const auto& m : modes) {
        auto table = make_kernel_table(*dev, m.opts);
        const bool bf16 = m.opts.weights == weight_dtype::bf16;
        for (auto rows : o.rows) {
          matmul_args a{xd, in, bf16 ? nullptr : wd, yd, out, rows, in, out, false};
          if (bf16)
            a.w_bf16 = wbd;
          table->matmul(stream_kind::compute, a); // warm-up (module load, caches)
          const double s = best_time(*dev, 3, [&] {
                             for (int32_t i = 0; i < o.repeats; ++i) table->matmul(stream_kind::compute, a);
                           }) /
                           o.repeats;
          const double flops = 2.0 * rows * in * out;
          const double wbytes = static_cast<double>(out) * in * (bf16 ? 2 : 4);
          std::printf("%-6s %6d %6d %6d %11.1f %9.2f %10.1f\n", m.name, rows, in, out, s * 1e6, flops / s / 1e12,
                      wbytes / s / 1e9);
          rows_json.push_back({{"mode", m.name}, {"rows", rows}, {"in", in}, {"out", out}, {"us", s * 1e6},
                               {"tflops", flops / s / 1e12}, {"weight_gbps", wbytes / s / 1e9}});
        }
      }
      for (void* p : std::initializer_list<void*>{xd, wd, wbd, yd}) dev->free_device(p);
    }
    nlohmann::json j = {{"bench", "matmul"}, {"preset", to_string(cfg.preset)}, {"size", to_string(cfg.size)},
                        {"device", dev->name()}, {"repeats", o.repeats}, {"rows", rows_json}};
    std::printf("BENCH_JSON %s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ordo bench matmul: " << e.what() << "\n";
    return 1;
  }
}

int run_bench_copy(const bench_copy_options& o) {
  spdlog::set_level(spdlog::level::warn);
  node_config cfg;
  if (!load_bench_config(o.config_path, o.overrides, cfg, true))
    return 2;
  if (o.peak_mib < 1 || o.units < 0 || o.repeats < 1) {
    std::cerr << "ordo bench copy: --peak-mib and --repeats must be >= 1, --units >= 0\n";
    return 2;
  }
  try {
    auto dev = make_configured_device(cfg);
    // (a) one large pinned copy each way: the ceiling of the link.
    const size_t peak_bytes = static_cast<size_t>(o.peak_mib) << 20;
    void* big_dev = dev->alloc_device(peak_bytes);
    void* big_host = dev->alloc_host_pinned(peak_bytes);
    double peak_h2d = best_time(*dev, o.repeats, [&] { dev->copy_async(stream_kind::load, big_dev, big_host, peak_bytes); });
    double peak_d2h = best_time(*dev, o.repeats, [&] { dev->copy_async(stream_kind::save, big_host, big_dev, peak_bytes); });
    dev->free_host_pinned(big_host);
    dev->free_device(big_dev);

    // (b) page units as the arena lays them out (one region per field, block b at b·block_bytes),
    // copied to / from a host buffer of whole units with one copy_async per field block.
    // A checkpoint's dims come from its config.json alone; no tensor is read.
    const model_dims dims = cfg.model_path.empty()
                                ? dims_of(cfg.preset, cfg.size)
                                : dims_of(read_hf_config(cfg.model_path), cfg.num_blocks * cfg.block_size);
    auto specs = region_layout(dims, cfg.kv, cfg.block_size);
    const int32_t units = o.units > 0 ? o.units : cfg.num_blocks;
    size_t unit_bytes = 0, min_block = 0, max_block = 0;
    for (const auto& s : specs) {
      size_t bb = s.row_bytes * static_cast<size_t>(s.rows_per_block);
      unit_bytes += bb;
      min_block = min_block == 0 ? bb : std::min(min_block, bb);
      max_block = std::max(max_block, bb);
    }
    const size_t total = unit_bytes * static_cast<size_t>(units);
    auto* arena = static_cast<uint8_t*>(dev->alloc_device(total));
    auto* host = static_cast<uint8_t*>(dev->alloc_host_pinned(total));
    std::vector<uint8_t*> regions;
    size_t region_offset = 0;
    for (const auto& s : specs) {
      regions.push_back(arena + region_offset);
      region_offset += s.row_bytes * static_cast<size_t>(s.rows_per_block) * static_cast<size_t>(units);
    }
    auto per_block = [&](bool to_host) {
      stream_kind stream = to_host ? stream_kind::save : stream_kind::load;
      for (int32_t u = 0; u < units; ++u)
        for (size_t f = 0; f < specs.size(); ++f) {
          size_t bb = specs[f].row_bytes * static_cast<size_t>(specs[f].rows_per_block);
          uint8_t* d = regions[f] + static_cast<size_t>(u) * bb;
          uint8_t* h = host + static_cast<size_t>(u) * unit_bytes + specs[f].offset_in_unit;
          if (to_host)
            dev->copy_async(stream, h, d, bb);
          else
            dev->copy_async(stream, d, h, bb);
        }
    };
    double units_d2h = best_time(*dev, o.repeats, [&] { per_block(true); });
    double units_h2d = best_time(*dev, o.repeats, [&] { per_block(false); });

    // (c) the same units moved by the kernel table's unit_copy: one gather / scatter launch
    // writing or reading the mapped pinned buffer directly (DESIGN §2.2).
    auto table = make_kernel_table(*dev);
    std::vector<uint64_t> block_bytes;
    for (const auto& s : specs) block_bytes.push_back(s.row_bytes * static_cast<size_t>(s.rows_per_block));
    std::vector<int32_t> unit_ids(static_cast<size_t>(units));
    for (int32_t u = 0; u < units; ++u) unit_ids[static_cast<size_t>(u)] = u;
    auto* regions_d = static_cast<uint8_t**>(dev->alloc_device(regions.size() * sizeof(uint8_t*)));
    auto* block_bytes_d = static_cast<uint64_t*>(dev->alloc_device(block_bytes.size() * sizeof(uint64_t)));
    auto* unit_ids_d = static_cast<int32_t*>(dev->alloc_device(unit_ids.size() * sizeof(int32_t)));
    dev->copy_async(stream_kind::load, regions_d, regions.data(), regions.size() * sizeof(uint8_t*));
    dev->copy_async(stream_kind::load, block_bytes_d, block_bytes.data(), block_bytes.size() * sizeof(uint64_t));
    dev->copy_async(stream_kind::load, unit_ids_d, unit_ids.data(), unit_ids.size() * sizeof(int32_t));
    dev->synchronize();
    auto kernel_copy = [&](bool to_host) {
      unit_copy_args a;
      a.regions = regions_d, a.block_bytes = block_bytes_d, a.unit_ids = unit_ids_d, a.host = host;
      a.num_fields = static_cast<int32_t>(specs.size()), a.num_units = units, a.max_block_bytes = max_block;
      a.direction = to_host ? unit_copy_direction::gather : unit_copy_direction::scatter;
      table->unit_copy(to_host ? stream_kind::save : stream_kind::load, a);
    };
    double kernel_d2h = best_time(*dev, o.repeats, [&] { kernel_copy(true); });
    double kernel_h2d = best_time(*dev, o.repeats, [&] { kernel_copy(false); });
    dev->free_device(unit_ids_d);
    dev->free_device(block_bytes_d);
    dev->free_device(regions_d);
    dev->free_host_pinned(host);
    dev->free_device(arena);

    const size_t copies = specs.size() * static_cast<size_t>(units);
    const double peak_h2d_gbps = gbps(static_cast<double>(peak_bytes), peak_h2d);
    const double peak_d2h_gbps = gbps(static_cast<double>(peak_bytes), peak_d2h);
    const double units_h2d_gbps = gbps(static_cast<double>(total), units_h2d);
    const double units_d2h_gbps = gbps(static_cast<double>(total), units_d2h);
    const double kernel_h2d_gbps = gbps(static_cast<double>(total), kernel_h2d);
    const double kernel_d2h_gbps = gbps(static_cast<double>(total), kernel_d2h);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::printf("ordo bench copy: %s/%s kv %s block %d on %s | best of %d\n", to_string(cfg.preset),
                to_string(cfg.size), to_string(cfg.kv), cfg.block_size, dev->name().c_str(), o.repeats);
    std::printf("page unit: %zu fields, %zu bytes (field blocks of %zu..%zu bytes); %d units = %.1f MiB, %zu copies\n",
                specs.size(), unit_bytes,
                min_block, max_block,
                units, static_cast<double>(total) / (1 << 20), copies);
    std::printf("%-34s %12s %10s %8s %9s\n", "path", "bytes", "ms", "GB/s", "of peak");
    std::printf("%-34s %12zu %10.3f %8.2f %9s\n", "peak host->device (one copy)", peak_bytes, peak_h2d * 1e3,
                peak_h2d_gbps, "1.00");
    std::printf("%-34s %12zu %10.3f %8.2f %9s\n", "peak device->host (one copy)", peak_bytes, peak_d2h * 1e3,
                peak_d2h_gbps, "1.00");
    std::printf("%-34s %12zu %10.3f %8.2f %9.3f\n", "units host->device (per field block)", total, units_h2d * 1e3,
                units_h2d_gbps, ratio(units_h2d_gbps, peak_h2d_gbps));
    std::printf("%-34s %12zu %10.3f %8.2f %9.3f\n", "units device->host (per field block)", total, units_d2h * 1e3,
                units_d2h_gbps, ratio(units_d2h_gbps, peak_d2h_gbps));
    std::printf("%-34s %12zu %10.3f %8.2f %9.3f\n", "scatter kernel host->device", total, kernel_h2d * 1e3,
                kernel_h2d_gbps, ratio(kernel_h2d_gbps, peak_h2d_gbps));
    std::printf("%-34s %12zu %10.3f %8.2f %9.3f\n", "gather kernel device->host", total, kernel_d2h * 1e3,
                kernel_d2h_gbps, ratio(kernel_d2h_gbps, peak_d2h_gbps));
    nlohmann::json j = {{"bench", "copy"},
                        {"preset", to_string(cfg.preset)},
                        {"size", to_string(cfg.size)},
                        {"kv_dtype", to_string(cfg.kv)},
                        {"block_size", cfg.block_size},
                        {"device", dev->name()},
                        {"repeats", o.repeats},
                        {"peak_bytes", peak_bytes},
                        {"peak_h2d_gbps", peak_h2d_gbps},
                        {"peak_d2h_gbps", peak_d2h_gbps},
                        {"unit_fields", specs.size()},
                        {"unit_bytes", unit_bytes},
                        {"units", units},
                        {"unit_copies", copies},
                        {"units_h2d_gbps", units_h2d_gbps},
                        {"units_d2h_gbps", units_d2h_gbps},
                        {"units_h2d_of_peak", ratio(units_h2d_gbps, peak_h2d_gbps)},
                        {"units_d2h_of_peak", ratio(units_d2h_gbps, peak_d2h_gbps)},
                        {"kernel_h2d_gbps", kernel_h2d_gbps},
                        {"kernel_d2h_gbps", kernel_d2h_gbps},
                        {"kernel_h2d_of_peak", ratio(kernel_h2d_gbps, peak_h2d_gbps)},
                        {"kernel_d2h_of_peak", ratio(kernel_d2h_gbps, peak_d2h_gbps)}};
    std::printf("BENCH_JSON %s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ordo bench copy: " << e.what() << "\n";
    return 1;
  }
}

int run_bench_offload(const bench_offload_options& o) {
  spdlog::set_level(spdlog::level::warn);
  node_config cfg;
  if (!load_bench_config(o.config_path, o.overrides, cfg))
    return 2;
  if (o.chunks < 1 || o.repeats < 1) {
    std::cerr << "ordo bench offload: --chunks and --repeats must be >= 1\n";
    return 2;
  }
  const int32_t blocks_per_chunk = cfg.chunk_size / cfg.block_size;
  const int64_t num_units = static_cast<int64_t>(o.chunks) * blocks_per_chunk;
  if (num_units > cfg.num_blocks) {
    std::cerr << "ordo bench offload: --chunks " << o.chunks << " of " << blocks_per_chunk << " blocks needs "
              << num_units << " blocks; set cache.num_blocks (now " << cfg.num_blocks << ") at least that high\n";
    return 2;
  }
  try {
    auto dev = make_configured_device(cfg);
    model mdl(to_model_options(cfg), *dev);
    auto table = make_kernel_table(*dev);
    const auto& fields = mdl.kv_fields();
    // The arena's fields as the step executor hands them to unit_copy (runtime/kv_codec.hpp).
    unit_copy_fields copy_fields(fields, *dev);
    // Chunk c takes units [c·blocks_per_chunk, (c+1)·blocks_per_chunk) of a seeded shuffle of the arena.
    std::vector<int32_t> unit_ids(static_cast<size_t>(cfg.num_blocks));
    std::iota(unit_ids.begin(), unit_ids.end(), 0);
    std::shuffle(unit_ids.begin(), unit_ids.end(), std::mt19937(12345));
    unit_ids.resize(static_cast<size_t>(num_units));
    auto* unit_ids_d = static_cast<int32_t*>(dev->alloc_device(unit_ids.size() * sizeof(int32_t)));
    dev->copy_async(stream_kind::load, unit_ids_d, unit_ids.data(), unit_ids.size() * sizeof(int32_t));
    dev->synchronize();

    // The store's arena holds exactly the N objects.
    const size_t chunk_bytes = kv_chunk_object_bytes(fields, blocks_per_chunk);
    const size_t total = chunk_bytes * static_cast<size_t>(o.chunks);
    const size_t capacity = host_store::object_span(chunk_bytes) * static_cast<size_t>(o.chunks);
    auto* arena = static_cast<uint8_t*>(dev->alloc_host_pinned(capacity));
    auto* scratch = dev->alloc_device(total);

    // First touch of the host pages and the first copy each way stay out of every timing.
    std::memset(arena, 0, capacity);
    dev->copy_async(stream_kind::load, scratch, arena, total);
    dev->copy_async(stream_kind::save, arena, scratch, total);
    dev->synchronize();
    // Baselines: one plain pinned copy of the same bytes each way, and the checksum alone.
    double memcpy_h2d = best_time(*dev, o.repeats, [&] { dev->copy_async(stream_kind::load, scratch, arena, total); });
    double memcpy_d2h = best_time(*dev, o.repeats, [&] { dev->copy_async(stream_kind::save, arena, scratch, total); });
    volatile uint64_t checksum_sink = 0; // keeps the timed hashing from being optimized away
    double checksum = best_time(*dev, o.repeats, [&] {
      for (int32_t c = 0; c < o.chunks; ++c)
        checksum_sink = checksum_sink ^ object_checksum(arena + static_cast<size_t>(c) * chunk_bytes, chunk_bytes);
    });

    const uint64_t fingerprint = 0x64616f6c66666f; // any fixed value: one namespace
    auto ref_of = [&](int32_t c) {
      object_ref o;
      o.key = object_key{fingerprint, static_cast<uint64_t>(c) + 1, static_cast<uint8_t>(object_kind::kv_chunk)};
      o.first_token = c * cfg.chunk_size;
      o.tokens = cfg.chunk_size;
      o.num_blocks = blocks_per_chunk;
      o.data_bytes = chunk_bytes;
      return o;
    };
    // A summed gather or scatter adds chunk c's checksum terms into sums_d[c], as a node's do.
    auto* sums_d = static_cast<uint64_t*>(dev->alloc_device(8 * static_cast<size_t>(o.chunks)));
    auto* sums_h = static_cast<uint64_t*>(dev->alloc_host_pinned(8 * static_cast<size_t>(o.chunks)));
    auto* zeros_h = static_cast<uint64_t*>(dev->alloc_host_pinned(8 * static_cast<size_t>(o.chunks)));
    std::memset(zeros_h, 0, 8 * static_cast<size_t>(o.chunks));
    // `direct`: the kernel reads (or writes) the mapped host buffer even where a GPU would stage it.
    auto copy_of = [&](int32_t c, uint8_t* host, bool to_host, bool summed, bool direct) {
      const int32_t* ids = unit_ids_d + static_cast<size_t>(c) * static_cast<size_t>(blocks_per_chunk);
      unit_copy_args a = chunk_copy_args(copy_fields, ids, blocks_per_chunk, host,
                                         to_host ? unit_copy_direction::gather : unit_copy_direction::scatter,
                                         /*segment_major=*/true);
      if (summed)
        a.checksum = sums_d + c;
      a.direct_host = direct;
      return a;
    };
    // The copies alone: every chunk's scatter from (gather into) the arena in one batch, with no
    // store step and no checksum. Direct: what the link gives a kernel that reads or writes mapped
    // host memory on this machine, beside the copy engine's plain copies; staged (loads): the copy
    // engine's copies into device memory, then the scatter from there.
    const auto copies_alone = [&](bool to_host, bool direct) {
      std::vector<unit_copy_args> batch;
      for (int32_t c = 0; c < o.chunks; ++c)
        batch.push_back(copy_of(c, arena + static_cast<size_t>(c) * chunk_bytes, to_host, false, direct));
      const stream_kind stream = to_host ? stream_kind::save : stream_kind::load;
      return best_time(*dev, o.repeats, [&] { table->unit_copy_batch(stream, batch.data(), batch.size()); });
    };
    const double scatter_alone = copies_alone(false, true), gather_alone = copies_alone(true, true);
    const double scatter_staged_alone = copies_alone(false, false);
    // One round's transfers: every chunk into its granted bytes in one batch (as a node's step
    // enqueues its loads or saves), then one synchronize. Summed: the sums are zeroed first, and
    // come back as each chunk's finished checksum.
    auto transfer_all = [&](const std::vector<store_grant>& grants, uint8_t* base, bool to_host, bool summed,
                            bool direct) {
      const stream_kind stream = to_host ? stream_kind::save : stream_kind::load;
      const size_t sums_bytes = 8 * static_cast<size_t>(o.chunks);
      if (summed)
        dev->copy_async(stream, sums_d, zeros_h, sums_bytes);
      std::vector<unit_copy_args> batch;
      for (int32_t c = 0; c < o.chunks; ++c)
        batch.push_back(copy_of(c, base + grants[static_cast<size_t>(c)].data_offset, to_host, summed, direct));
      table->unit_copy_batch(stream, batch.data(), batch.size());
      if (summed)
        dev->copy_async(stream, sums_h, sums_d, sums_bytes);
      dev->synchronize();
      std::vector<uint64_t> checksums;
      if (summed)
        for (int32_t c = 0; c < o.chunks; ++c)
          checksums.push_back(checksum_finish(sums_h[c], chunk_bytes));
      return checksums;
    };

    // One path = a store taking store steps as a node's connector sends them: one step per round
    // (engine step), carrying the previous round's commits (or unpins) with this round's reserves
    // (or pins), then one kernel per chunk into the granted bytes and one synchronize. So every
    // timed round pays one store step and one batch of commits with their checksums, as a node's
    // step does. SAVE rounds also empty the store in that step (evict_all runs after the commits,
    // before the reserves); LOAD pins verify header and checksum. Round -1 of each is an untimed
    // warm-up (first kernel launches); the last round's commits and unpins go out untimed.
    struct path_times {
      double save = 1e30, load = 1e30;
    };
    // `summed`: the gathers sum each object's checksum and the commits carry it, the pins check
    // headers only and the scatters' sums are checked against the grants (a node's transfers);
    // otherwise the store hashes each object on the host at commit and at pin. `direct`: the copy
    // kernels use the mapped host buffers even where a GPU would stage them.
    auto run_path = [&](const std::function<store_step_done(store_step)>& step, uint8_t* base, bool summed,
                        bool direct = false) {
      path_times t;
      uint64_t seq = 0;
      auto send = [&](store_step s) {
        s.header = command_header{1, ++seq};
        return step(std::move(s));
      };
      auto granted = [&](const std::vector<store_grant>& grants, const char* what) {
        if (grants.size() != static_cast<size_t>(o.chunks))
          throw std::runtime_error(std::string(what) + ": " + std::to_string(grants.size()) + " answers for " +
                                   std::to_string(o.chunks) + " chunks");
        for (size_t c = 0; c < grants.size(); ++c)
          if (!grants[c].ok)
            throw std::runtime_error(std::string(what) + " of chunk " + std::to_string(c) + ": " + grants[c].status);
      };
      std::vector<object_ref> refs;
      std::vector<object_key> keys;
      for (int32_t c = 0; c < o.chunks; ++c) {
        refs.push_back(ref_of(c));
        keys.push_back(ref_of(c).key);
      }
      std::vector<uint64_t> checksums; // the previous round's, summed by its gathers
      for (int32_t r = -1; r < o.repeats; ++r) {
        store_step s;
        if (r > -1) {
          s.commits = keys;
          s.commit_checksums = checksums;
        }
        s.evict_all = true;
        s.reserves = refs;
        dev->synchronize();
        auto t0 = clock_type::now();
        auto d = send(std::move(s));
        granted(d.reserves, "reserve");
        checksums = transfer_all(d.reserves, base, true, summed, direct);
        if (r >= 0)
          t.save = std::min(t.save, seconds_since(t0));
      }
      store_step last;
      last.commits = keys;
      last.commit_checksums = checksums;
      send(std::move(last));
      for (int32_t r = -1; r < o.repeats; ++r) {
        store_step s;
        if (r > -1)
          s.unpins = keys;
        s.pins = refs;
        s.pins_summed = summed;
        dev->synchronize();
        auto t0 = clock_type::now();
        auto d = send(std::move(s));
        granted(d.pins, "pin");
        const auto loaded = transfer_all(d.pins, base, false, summed, direct);
        for (size_t c = 0; c < loaded.size(); ++c) // the verdicts a node's step checks before its parked requests run
          if (loaded[c] != d.pins[c].checksum)
            throw std::runtime_error("load of chunk " + std::to_string(c) + ": the scatter's checksum differs");
        if (r >= 0)
          t.load = std::min(t.load, seconds_since(t0));
      }
      last = {};
      last.unpins = keys;
      send(std::move(last));
      return t;
    };

    auto store = std::make_unique<host_store>(arena, capacity);
    const auto in_process_step = [&](store_step s) { return apply(store.get(), s).done; };
    const path_times hashed = run_path(in_process_step, arena, false);
    const path_times in_process = run_path(in_process_step, arena, true);
    const path_times direct = run_path(in_process_step, arena, true, /*direct=*/true);
    const double save = in_process.save, load = in_process.load, save_hashed = hashed.save, load_hashed = hashed.load;
    // The same rounds through a store server in another process, in this run.
    std::optional<path_times> remote;
    std::string remote_name;
    if (o.store_server) {
      auto server = start_bench_store_server(*dev, capacity, fingerprint);
      remote_name = server->name();
      remote = run_path([&](store_step s) { return server->step(std::move(s)); }, server->arena(), true);
    }
    const std::string broken = store->check_invariants();
    if (!broken.empty())
      throw std::runtime_error("host store: " + broken);
    store.reset();
    dev->free_device(scratch);
    dev->free_host_pinned(arena);
    dev->free_device(unit_ids_d);
    dev->free_device(sums_d);
    dev->free_host_pinned(sums_h);
    dev->free_host_pinned(zeros_h);

    // The report as a table: each path's time, its GB/s, and its share of the plain copy the same
    // way (a ratio key in the JSON where the path has one).
    const double bytes = static_cast<double>(total);
    const double memcpy_d2h_gbps = gbps(bytes, memcpy_d2h), memcpy_h2d_gbps = gbps(bytes, memcpy_h2d);
    const double save_gbps = gbps(bytes, save), load_gbps = gbps(bytes, load);
    constexpr double is_copy = -1; // of_copy of the plain copies themselves: "1.00"
    struct path_row {
      const char* label;
      double seconds;
      const char* gbps_key;
      double of_copy;                  // the plain copy's GB/s the same way; 0: no ratio ("-")
      const char* ratio_key = nullptr; // where the JSON has the ratio too
      double in_process_gbps = 0;      // > 0: also against the in-process path, under in_process_key
      const char* in_process_key = nullptr;
    };
    std::vector<path_row> rows = {
        {"copy device->host (one copy)", memcpy_d2h, "memcpy_d2h_gbps", is_copy},
        {"copy host->device (one copy)", memcpy_h2d, "memcpy_h2d_gbps", is_copy},
        {"checksum of the data (host threads)", checksum, "checksum_gbps", 0},
        {"gather kernel alone (no step, no sum)", gather_alone, "gather_alone_gbps", memcpy_d2h_gbps},
        {"scatter kernel alone (no step, no sum)", scatter_alone, "scatter_alone_gbps", memcpy_h2d_gbps},
        {"copies + scatter, staged (no step, no sum)", scatter_staged_alone, "scatter_staged_alone_gbps",
         memcpy_h2d_gbps},
        {"save, host hashes: commit + reserve + gather", save_hashed, "save_host_checksum_gbps", memcpy_d2h_gbps},
        {"save: commit + reserve + gather (summing)", save, "save_gbps", memcpy_d2h_gbps, "save_ratio"},
        {"load, host hashes: unpin + pin + scatter", load_hashed, "load_host_checksum_gbps", memcpy_h2d_gbps},
        {"load: unpin + pin + scatter (summing)", load, "load_gbps", memcpy_h2d_gbps, "load_ratio"},
        {"load, scatter from host memory (summing)", direct.load, "load_direct_gbps", memcpy_h2d_gbps,
         "load_direct_ratio"},
    };
    if (remote) {
      rows.push_back({"store server: save (other process)", remote->save, "store_save_gbps", memcpy_d2h_gbps,
                      "store_save_ratio", save_gbps, "store_save_of_in_process"});
      rows.push_back({"store server: load (other process)", remote->load, "store_load_gbps", memcpy_h2d_gbps,
                      "store_load_ratio", load_gbps, "store_load_of_in_process"});
    }
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    std::printf("ordo bench offload: %s/%s kv %s block %d chunk %d on %s | best of %d\n", to_string(cfg.preset),
                to_string(cfg.size), to_string(cfg.kv), cfg.block_size, cfg.chunk_size, dev->name().c_str(),
                o.repeats);
    std::printf("%d chunk objects of %d blocks x %zu fields = %zu bytes each (%.1f MiB in all); store arena %zu bytes\n",
                o.chunks, blocks_per_chunk, fields.size(), chunk_bytes, static_cast<double>(total) / (1 << 20),
                capacity);
    std::printf("%-44s %12s %10s %8s %9s\n", "path", "bytes", "ms", "GB/s", "of copy");
    nlohmann::json j = {{"bench", "offload"},
                        {"preset", to_string(cfg.preset)},
                        {"size", to_string(cfg.size)},
                        {"kv_dtype", to_string(cfg.kv)},
                        {"block_size", cfg.block_size},
                        {"chunk_size", cfg.chunk_size},
                        {"device", dev->name()},
                        {"repeats", o.repeats},
                        {"chunks", o.chunks},
                        {"blocks_per_chunk", blocks_per_chunk},
                        {"chunk_bytes", chunk_bytes},
                        {"bytes", total}};
    for (const path_row& r : rows) {
      const double g = gbps(bytes, r.seconds);
      std::printf("%-44s %12zu %10.3f %8.2f ", r.label, total, r.seconds * 1e3, g);
      if (r.of_copy > 0)
        std::printf("%9.3f", ratio(g, r.of_copy));
      else
        std::printf("%9s", r.of_copy == is_copy ? "1.00" : "-");
      if (r.in_process_gbps > 0)
        std::printf("  (%.3f of in-process)", ratio(g, r.in_process_gbps));
      std::printf("\n");
      j[r.gbps_key] = g;
      if (r.ratio_key != nullptr)
        j[r.ratio_key] = ratio(g, r.of_copy);
      if (r.in_process_key != nullptr)
        j[r.in_process_key] = ratio(g, r.in_process_gbps);
    }
    if (remote)
      std::printf("store server: %s\n", remote_name.c_str());
    std::printf("BENCH_JSON %s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "ordo bench offload: " << e.what() << "\n";
    return 1;
  }
}

} // namespace ordo
