#include <catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>
#include <sys/wait.h>

#include "runtime/metrics.hpp"
#include "runtime/node_metrics.hpp"

using namespace ordo;

namespace {

struct promtool_verdict {
  int exit_code = -1;
  std::string output; // each problem on its own line; empty when the exposition is clean
};

// `promtool check metrics` on `exposition`. Fails the test (never skips) when promtool is not
// installed: `make test` installs it (scripts/install-deps.sh, Debian package prometheus).
promtool_verdict promtool_check(const std::string& exposition) {
  INFO("promtool is not installed: run scripts/install-deps.sh (Debian package prometheus)");
  REQUIRE(std::system("command -v promtool >/dev/null 2>&1") == 0);
  char path[] = "/tmp/ordo_metrics_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, exposition.data(), exposition.size()) == static_cast<ssize_t>(exposition.size()));
  close(fd);
  promtool_verdict v;
  FILE* p = popen(("promtool check metrics < " + std::string(path) + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    v.output.append(buf, n);
  int status = pclose(p);
  unlink(path);
  v.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return v;
}

// The stats and results of a few requests: two finished, two cancelled, three rejected, one
// host-tier load.
void observe_a_few(node_metrics& m) {
  scheduler_stats s;
  s.num_requests = 7;
  s.prompt_tokens = 300;
  s.prompt_tokens_from_hbm = 96;
  s.prompt_tokens_computed = 204;
  s.generation_tokens = 8;
  s.num_steps = 12;
  s.num_free_blocks = 500;
  s.num_cached_blocks = 6;
  s.loads_total = 1;
  s.bytes_loaded = 4096;
  completion_result r;
  r.request_id = 1;
  r.token_ids = {1, 2, 3, 4};
  r.finish_reason = "length";
  r.prompt_tokens = 100;
  r.reason = "hbm hit capped at floor_16(P - 1): the last prompt token is always recomputed";
  r.duration_ms = 40;
  r.first_token_ms = 12.5;
  r.inter_token_ms = {3.0f, 4.0f, 250.0f};
  m.observe(s, &r);
  s.num_cancelled = 2;
  s.num_rejected = 3;
  m.observe(s, nullptr);
  completion_result cold = r;
  cold.request_id = 2;
  cold.finish_reason = "stop";
  cold.reason = "no prefix block is cached";
  cold.token_ids = {5};
  cold.first_token_ms = 37.5;
  cold.inter_token_ms.clear();
  m.observe(s, &cold);
  m.count_error(400);
  m.count_error(429); // the frontend's answer to a rejection: counted once, as "rejected"
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

} // namespace

TEST_CASE("a small registry renders exactly", "[metrics]") {
  metrics_registry reg;
  auto& ok = reg.counter("ordo_requests_total", "Requests finished, by status.", {{"status", "ok"}});
  auto& err = reg.counter("ordo_requests_total", "Requests finished, by status.", {{"status", "error"}});
  auto& blocks = reg.gauge("ordo_cache_free_blocks", "Free KV blocks.", {{"tier", "hbm"}});
  auto& ratio = reg.gauge("ordo_prefix_hit_ratio", "Prompt tokens reused / prompt tokens.");
  auto& lat = reg.histogram("ordo_step_duration_seconds", "Device time of one engine step.",
                            {0.5, 1, 2.5}, {{"device", "cpu"}});
  auto& odd = reg.counter("ordo_escapes_total", "Back\\slash and\nnewline.",
                          {{"path", "a\"b\\c\nd"}});

  ok.inc();
  ok.inc(2);
  err.inc();
  blocks.set(480);
  blocks.dec(3);
  ratio.set(0.1);
  lat.observe(0.25);
  lat.observe(0.5); // on a bound: counts in that bucket (le)
  lat.observe(2);
  lat.observe(7.75);
  odd.inc(18446744073709551615ull);

  // Registering the same series again returns the same handle.
  CHECK(&reg.counter("ordo_requests_total", "Requests finished, by status.", {{"status", "ok"}}) == &ok);

  CHECK(reg.render_prometheus() ==
        "# HELP ordo_requests_total Requests finished, by status.\n"
        "# TYPE ordo_requests_total counter\n"
        "ordo_requests_total{status=\"ok\"} 3\n"
        "ordo_requests_total{status=\"error\"} 1\n"
        "# HELP ordo_cache_free_blocks Free KV blocks.\n"
        "# TYPE ordo_cache_free_blocks gauge\n"
        "ordo_cache_free_blocks{tier=\"hbm\"} 477\n"
        "# HELP ordo_prefix_hit_ratio Prompt tokens reused / prompt tokens.\n"
        "# TYPE ordo_prefix_hit_ratio gauge\n"
        "ordo_prefix_hit_ratio 0.1\n"
        "# HELP ordo_step_duration_seconds Device time of one engine step.\n"
        "# TYPE ordo_step_duration_seconds histogram\n"
        "ordo_step_duration_seconds_bucket{device=\"cpu\",le=\"0.5\"} 2\n"
        "ordo_step_duration_seconds_bucket{device=\"cpu\",le=\"1\"} 2\n"
        "ordo_step_duration_seconds_bucket{device=\"cpu\",le=\"2.5\"} 3\n"
        "ordo_step_duration_seconds_bucket{device=\"cpu\",le=\"+Inf\"} 4\n"
        "ordo_step_duration_seconds_sum{device=\"cpu\"} 10.5\n"
        "ordo_step_duration_seconds_count{device=\"cpu\"} 4\n"
        "# HELP ordo_escapes_total Back\\\\slash and\\nnewline.\n"
        "# TYPE ordo_escapes_total counter\n"
        "ordo_escapes_total{path=\"a\\\"b\\\\c\\nd\"} 18446744073709551615\n");
}

TEST_CASE("an empty registry renders nothing; gauges print special values", "[metrics]") {
  metrics_registry reg;
  CHECK(reg.render_prometheus().empty());
  auto& g = reg.gauge("ordo_g", "g");
  g.set(-std::numeric_limits<double>::infinity());
  CHECK(reg.render_prometheus() == "# HELP ordo_g g\n# TYPE ordo_g gauge\nordo_g -Inf\n");
  g.set(1e-7);
  CHECK(reg.render_prometheus() == "# HELP ordo_g g\n# TYPE ordo_g gauge\nordo_g 1e-07\n");
}

TEST_CASE("malformed registrations are refused", "[metrics]") {
  metrics_registry reg;
  CHECK_THROWS_AS(reg.counter("requests_total", "no prefix"), std::invalid_argument);
  CHECK_THROWS_AS(reg.counter("ordo_requests", "counter without _total"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ordo_bad-name", "dash"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ordo_x", "bad label", {{"1tier", "hbm"}}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ordo_x", "dup label", {{"a", "1"}, {"a", "2"}}), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ordo_h", "le label", {1}, {{"le", "1"}}), std::invalid_argument);
  CHECK_THROWS_AS(reg.histogram("ordo_h", "unsorted", {2, 1}), std::invalid_argument);
  // What promtool check metrics flags is refused at registration.
  CHECK_THROWS_WITH(reg.gauge("ordo_hbm_blocks_total", "a gauge named like a counter"),
                    "metric ordo_hbm_blocks_total: only a counter's name may end in _total (a gauge "
                    "could end in _capacity, _current ...)");
  CHECK_THROWS_AS(reg.histogram("ordo_lat_total", "histogram", {1}), std::invalid_argument);
  CHECK_THROWS_WITH(reg.gauge("ordo_x_count", "x"),
                    "metric ordo_x_count: the suffix _count is reserved for a histogram's series");
  CHECK_THROWS_AS(reg.gauge("ordo_x_bucket", "x"), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ordo_x_sum", "x"), std::invalid_argument);
  CHECK_THROWS_WITH(reg.gauge("ordo_x", ""), "metric ordo_x: help text must not be empty");
  CHECK_THROWS_AS(reg.gauge("ordo_x", "le label", {{"le", "1"}}), std::invalid_argument);
  CHECK_THROWS_AS(reg.gauge("ordo_x", "quantile label", {{"quantile", "0.5"}}), std::invalid_argument);
  reg.gauge("ordo_used", "used");
  CHECK_THROWS_AS(reg.counter("ordo_used", "used"), std::invalid_argument);
  CHECK_THROWS_WITH(reg.gauge("ordo_used", "other help"),
                    "metric ordo_used: already registered with other help text");
  reg.histogram("ordo_lat", "lat", {1, 2}, {{"a", "x"}});
  CHECK_THROWS_WITH(reg.histogram("ordo_lat", "lat", {1, 3}, {{"a", "y"}}),
                    "metric ordo_lat: already registered with other buckets");
  // Refused calls registered nothing.
  CHECK(reg.render_prometheus() ==
        "# HELP ordo_used used\n# TYPE ordo_used gauge\nordo_used 0\n"
        "# HELP ordo_lat lat\n# TYPE ordo_lat histogram\n"
        "ordo_lat_bucket{a=\"x\",le=\"1\"} 0\nordo_lat_bucket{a=\"x\",le=\"2\"} 0\n"
        "ordo_lat_bucket{a=\"x\",le=\"+Inf\"} 0\nordo_lat_sum{a=\"x\"} 0\n"
        "ordo_lat_count{a=\"x\"} 0\n");
}

TEST_CASE("increments from many threads are all counted", "[metrics]") {
  metrics_registry reg;
  auto& c = reg.counter("ordo_events_total", "events");
  auto& g = reg.gauge("ordo_level", "level");
  auto& h = reg.histogram("ordo_sizes", "sizes", exponential_buckets(1, 2, 4)); // 1 2 4 8
  constexpr int num_threads = 4;
  constexpr int per_thread = 100000;
  std::atomic<int> num_ready{0}; // start together so the updates really overlap
  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) {
    threads.emplace_back([&, t] {
      num_ready.fetch_add(1);
      while (num_ready.load() < num_threads)
        std::this_thread::yield();
      for (int i = 0; i < per_thread; ++i) {
        c.inc();
        g.add(0.5);
        h.observe((i + t) % 2 == 0 ? 1.0 : 3.0);
      }
    });
  }
  // Rendering while writers run must not block them or tear the text.
  for (int i = 0; i < 20; ++i)
    CHECK(reg.render_prometheus().find("# TYPE ordo_sizes histogram\n") != std::string::npos);
  for (auto& th : threads)
    th.join();

  const uint64_t total = uint64_t{num_threads} * per_thread;
  CHECK(c.value() == total);
  CHECK(g.value() == 0.5 * total);
  CHECK(h.cumulative_counts() == std::vector<uint64_t>{total / 2, total / 2, total, total, total});
  CHECK(h.sum() == 2.0 * total); // 1s and 3s are exact in double
  const std::string text = reg.render_prometheus();
  CHECK(text.find("ordo_events_total 400000\n") != std::string::npos);
  CHECK(text.find("ordo_level 200000\n") != std::string::npos);
  CHECK(text.find("ordo_sizes_count 400000\n") != std::string::npos);
}

TEST_CASE("a node's exposition passes promtool check metrics", "[metrics][promtool]") {
  node_config cfg;
  node_metrics m(cfg);
  // Before any observation: a clean exposition, with the whole pool free.
  const std::string fresh = m.render();
  auto v = promtool_check(fresh);
  INFO(fresh);
  CHECK(v.output == "");
  CHECK(v.exit_code == 0);
  CHECK(has_line(fresh, "ordo_hbm_blocks_capacity 512"));
  CHECK(has_line(fresh, "ordo_hbm_blocks_free 512"));
  CHECK(fresh.find("ordo_hbm_blocks_total") == std::string::npos);

  observe_a_few(m);
  const std::string text = m.render();
  v = promtool_check(text);
  INFO(text);
  CHECK(v.output == "");
  CHECK(v.exit_code == 0);
}

TEST_CASE("a node's exposition counts outcomes and latencies", "[metrics]") {
  node_metrics m(node_config{});
  observe_a_few(m);
  const std::string text = m.render();
  INFO(text);
  for (const char* line : {
           "ordo_requests_total{status=\"ok\"} 2",
           "ordo_requests_total{status=\"cancelled\"} 2",
           "ordo_requests_total{status=\"rejected\"} 3",
           "ordo_requests_total{status=\"400\"} 1",
           "ordo_hbm_blocks_free 500",
           "ordo_time_to_first_token_seconds_bucket{le=\"0.01\"} 0",
           "ordo_time_to_first_token_seconds_bucket{le=\"0.02\"} 1",
           "ordo_time_to_first_token_seconds_bucket{le=\"0.04\"} 2",
           "ordo_time_to_first_token_seconds_count 2",
           "ordo_time_to_first_token_seconds_sum 0.05",
           "ordo_inter_token_latency_seconds_bucket{le=\"0.0025\"} 0",
           "ordo_inter_token_latency_seconds_bucket{le=\"0.005\"} 2",
           "ordo_inter_token_latency_seconds_bucket{le=\"0.2\"} 2",
           "ordo_inter_token_latency_seconds_bucket{le=\"0.3\"} 3",
           "ordo_inter_token_latency_seconds_count 3",
       }) {
    INFO(line);
    CHECK(has_line(text, line));
  }
  // A 429 is the scheduler's rejection: one series counts it, not two.
  CHECK(text.find("status=\"429\"") == std::string::npos);
}

TEST_CASE("no label of the exposition carries what a client sent", "[metrics]") {
  const std::string salt = "tenant-7f3a-private-salt";
  node_metrics m(node_config{});
  observe_a_few(m);
  // Text a request could smuggle in: its salt in the reason sentence and the finish reason.
  scheduler_stats s;
  completion_result r;
  r.token_ids = {1};
  r.finish_reason = salt;
  r.reason = "cache_salt " + salt + " namespace: no prefix block is cached";
  m.observe(s, &r);
  const std::string text = m.render();
  INFO(text);
  CHECK(text.find(salt) == std::string::npos);

  // Every label value comes from a fixed set (or is an HTTP status or a bucket bound).
  const std::set<std::string> fixed = {"ok",        "cancelled",  "rejected",      "stop",         "length",
                                       "hbm",       "cpu",        "store",         "load",         "save",
                                       "missing",   "checksum",   "header",        "host_tier",    "host_load_failed",
                                       "interval_zero", "no_checkpoint", "prompt_end", "block_evicted", "cold",
                                       "short_prompt", "pulled",    "missed",        "failed"};
  const std::regex label(R"re(([a-z_]+)="([^"]*)")re");
  int num_labels = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), label); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1], value = (*it)[2];
    ++num_labels;
    INFO(name << "=" << value);
    if (name == "le")
      CHECK(std::regex_match(value, std::regex(R"(\+Inf|[0-9.e+-]+)")));
    else if (name == "status")
      CHECK((fixed.count(value) || std::regex_match(value, std::regex("[1-5][0-9][0-9]"))));
    else
      CHECK(fixed.count(value) == 1);
  }
  CHECK(num_labels > 20); // the check above is not vacuous
}
