// `ordo bench trace`: what recording a trace costs a node (docs/traces.md).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/node.hpp"
#include "messages/trace/trace_file.hpp"
#include "tools/bench.hpp"

namespace ordo {

namespace {

struct run_result {
  double seconds = 0;
  uint64_t steps = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
  int failures = 0;
};

// Distinct prompts (no prefix shared between requests), the same in every run.
std::vector<completion_request> workload(const bench_trace_options& o) {
  std::vector<completion_request> reqs;
  for (int32_t i = 0; i < o.requests; ++i) {
    completion_request r;
    r.request_id = static_cast<uint64_t>(i + 1);
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u + 7;
    for (int32_t t = 0; t < o.prompt_tokens; ++t) {
      x = x * 1664525u + 1013904223u;
      r.prompt.push_back(static_cast<int32_t>(1 + (x >> 8) % 250));
    }
    r.max_tokens = o.max_tokens;
    r.seed = static_cast<uint64_t>(i);
    reqs.push_back(std::move(r));
  }
  return reqs;
}

run_result run_once(node_config cfg, const std::vector<completion_request>& reqs, int32_t concurrency,
                    const std::string& trace_path) {
  cfg.trace_path = trace_path;
  run_result out;
  node n(cfg);
  n.start();
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int32_t c = 0; c < concurrency; ++c)
    clients.emplace_back([&] {
      for (size_t i = next++; i < reqs.size(); i = next++)
        if (std::holds_alternative<completion_failed>(n.complete(reqs[i], std::chrono::seconds(600))))
          ++failures;
    });
  for (auto& t : clients)
    t.join();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.failures = failures;
  n.drain_and_stop();
  if (!trace_path.empty()) {
    auto trace = read_trace(trace_path);
    out.records = trace.size();
    for (size_t i = 0; i < trace.size(); ++i)
      if (trace[i].getPayload().isStepPlan() && std::string(trace[i].getActor().cStr()) == "model_runner")
        ++out.steps;
    struct stat st {};
    if (::stat(trace_path.c_str(), &st) == 0)
      out.bytes = static_cast<uint64_t>(st.st_size);
    ::unlink(trace_path.c_str());
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

} // namespace

int run_bench_trace(const bench_trace_options& o) {
  spdlog::set_level(spdlog::level::warn);
  node_config cfg;
  try {
    auto sets = o.overrides;
    sets.push_back("server.port=0");
    cfg = load_config_file(o.config_path, sets);
  } catch (const std::exception& e) {
    std::cerr << "ordo bench trace: invalid config: " << e.what() << "\n";
    return 2;
  }
  if (o.rounds < 1 || o.requests < 1 || o.concurrency < 1 || o.prompt_tokens < 1) {
    std::cerr << "ordo bench trace: --rounds, --requests, --concurrency and --prompt-tokens must be at least 1\n";
    return 2;
  }
  const auto reqs = workload(o);
  const std::string path = o.trace_dir + "/ordo_bench_trace_" + std::to_string(::getpid()) + ".trace";
  run_once(cfg, reqs, o.concurrency, ""); // warm-up (page cache, allocator)
  std::vector<double> off, on, ratios;
  run_result last_on;
  std::printf("%-6s %12s %12s %8s %10s %12s %12s\n", "round", "off (s)", "on (s)", "on/off", "steps", "records/step",
              "bytes/step");
  for (int32_t r = 0; r < o.rounds; ++r) {
    // Alternate which goes first, so a drift in the machine does not favour one side.
    run_result a, b;
    if (r % 2 == 0) {
      a = run_once(cfg, reqs, o.concurrency, "");
      b = run_once(cfg, reqs, o.concurrency, path);
    } else {
      b = run_once(cfg, reqs, o.concurrency, path);
      a = run_once(cfg, reqs, o.concurrency, "");
    }
    if (a.failures || b.failures) {
      std::cerr << "ordo bench trace: " << a.failures + b.failures << " requests failed\n";
      return 1;
    }
    off.push_back(a.seconds);
    on.push_back(b.seconds);
    ratios.push_back(b.seconds / a.seconds);
    last_on = b;
    std::printf("%-6d %12.4f %12.4f %8.4f %10llu %12.1f %12.0f\n", r + 1, a.seconds, b.seconds, b.seconds / a.seconds,
                static_cast<unsigned long long>(b.steps), b.steps ? double(b.records) / double(b.steps) : 0.0,
                b.steps ? double(b.bytes) / double(b.steps) : 0.0);
  }
  double ratio = median(ratios);
  std::printf("median: off %.4f s, on %.4f s, on/off %.4f (recording costs %+.2f %%), %.0f bytes and %.1f records "
              "per step\n",
              median(off), median(on), ratio, (ratio - 1) * 100,
              last_on.steps ? double(last_on.bytes) / double(last_on.steps) : 0.0,
              last_on.steps ? double(last_on.records) / double(last_on.steps) : 0.0);
  nlohmann::json j = {{"bench", "trace"},
                      {"config", o.config_path},
                      {"overrides", o.overrides},
                      {"rounds", o.rounds},
                      {"requests", o.requests},
                      {"concurrency", o.concurrency},
                      {"prompt_tokens", o.prompt_tokens},
                      {"max_tokens", o.max_tokens},
                      {"off_s_median", median(off)},
                      {"on_s_median", median(on)},
                      {"on_off_ratio_median", ratio},
                      {"steps", last_on.steps},
                      {"bytes_per_step", last_on.steps ? double(last_on.bytes) / double(last_on.steps) : 0.0},
                      {"records_per_step", last_on.steps ? double(last_on.records) / double(last_on.steps) : 0.0}};
  std::printf("BENCH_JSON %s\n", j.dump().c_str());
  return 0;
}

} // namespace ordo
