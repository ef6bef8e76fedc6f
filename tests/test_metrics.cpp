#include <catch.hpp>

#include <atomic>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/metrics.hpp"

using namespace ordo;

TEST_CASE("a small registry renders exactly", "[metrics]") {
  metrics_registry reg;
  auto& ok = reg.counter("ordo_requests_total", "Requests finished, by status.", {{"status", "ok"}});
  auto& err = reg.counter("ordo_requests_total", "Requests finished, by status.", {{"status", "error"}});
  auto& blocks = reg.gauge("ordo_cache_free_blocks", "Free KV blocks.", {{"tier", "hbm"}});
  auto& ratio = reg.gauge("ordo_prefix_hit_ratio", "Prompt tokens reused / prompt tokens.");
  auto& lat = reg.histogram("ordo_step_duration_ms", "Device time of one engine step.",
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
        "# HELP ordo_step_duration_ms Device time of one engine step.\n"
        "# TYPE ordo_step_duration_ms histogram\n"
        "ordo_step_duration_ms_bucket{device=\"cpu\",le=\"0.5\"} 2\n"
        "ordo_step_duration_ms_bucket{device=\"cpu\",le=\"1\"} 2\n"
        "ordo_step_duration_ms_bucket{device=\"cpu\",le=\"2.5\"} 3\n"
        "ordo_step_duration_ms_bucket{device=\"cpu\",le=\"+Inf\"} 4\n"
        "ordo_step_duration_ms_sum{device=\"cpu\"} 10.5\n"
        "ordo_step_duration_ms_count{device=\"cpu\"} 4\n"
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
