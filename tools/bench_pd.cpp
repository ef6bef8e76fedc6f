// `ordo bench pd` (tools/bench.hpp): TTFT of P/D against a single node and the transfer floor.
// Three `ordo node` processes of this binary (reference, prefill, decode) on loopback; per prompt
// length and repeat one fresh prompt goes through the reference node and through the P/D pair
// (prefill, then decode with the prefill answer's kv_transfer_params), and the decode node's
// answer must name the prefill node as its source (from.peer > 0) with the reference's digest.
// The floor is the bytes the decode node loaded (its /metrics counter) over one plain host→device
// copy of as many bytes on the configured device, measured in the same run.
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/config.hpp"
#include "runtime/device.hpp"
#include "runtime/model_presets.hpp"
#include "tools/bench.hpp"
#include "actors/net/http_client.hpp"
#include "tools/prometheus_text.hpp"
#include "tools/seeded_prompt.hpp"
#include "tools/harness/child_supervisor.hpp"

namespace ordo {

namespace {

using clock_type = std::chrono::steady_clock;
using nlohmann::json;

constexpr int ready_limit_s = 60;     // a node's start, model construction included
constexpr int request_limit_s = 600;  // one request (a long cold prefill on a slow device)
constexpr int stop_limit_s = 10;      // SIGTERM → exit (the node drains), then SIGKILL
constexpr int32_t copy_repeats = 5;   // the floor's copy: best of

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct bench_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One `ordo node` child of this binary. Its stdout is a pipe (the ready line); its stderr goes to
// an unlinked temporary file, read back only to explain a failure. The destructor stops it by pid.
// Runs on the bench's main thread only.
class node_process {
public:
  node_process(std::string role, const std::vector<std::string>& args) : role_(std::move(role)) {
    char path[] = "/tmp/ordo_bench_pd_XXXXXX";
    err_fd_ = ::mkostemp(path, O_CLOEXEC);
    if (err_fd_ < 0)
      throw bench_failure("cannot create a file for the " + role_ + " node's stderr: " + std::strerror(errno));
    ::unlink(path);
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0)
      throw bench_failure(std::string("pipe: ") + std::strerror(errno));
    child_.start(args, -1, out[1], err_fd_, "ordo bench pd"); // gone with the bench, even a SIGKILLed one
    const int saved = errno;
    ::close(out[1]);
    out_fd_ = out[0];
    started_pid_ = child_.pid();
    if (started_pid_ < 0)
      throw bench_failure(std::string("fork: ") + std::strerror(saved));
  }

  ~node_process() { stop(); }
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  const std::string& role() const { return role_; }
  pid_t pid() const { return child_.pid(); }
  int http_port() const { return http_port_; }
  const std::string& endpoints() const { return endpoints_; }

  // Reads stdout until the ready line `listening on http://HOST:PORT[ tcp://HOST:PORT]`, or
  // `until` passes, or the process exits. Throws with the stderr tail on failure.
  void wait_ready(clock_type::time_point until) {
    for (;;) {
      const auto nl = out_.find('\n');
      if (nl != std::string::npos) {
        const std::string line = out_.substr(0, nl);
        const std::string prefix = "listening on http://";
        if (line.rfind(prefix, 0) == 0) {
          endpoints_ = line.substr(std::string("listening on ").size());
          const std::string http = line.substr(prefix.size(), line.find(' ', prefix.size()) - prefix.size());
          http_port_ = std::atoi(http.c_str() + http.rfind(':') + 1);
          if (http_port_ > 0)
            return;
        }
        out_.erase(0, nl + 1); // not the ready line
        continue;
      }
      int status = 0;
      if (!child_.alive(&status)) {
        fail("exited (" + describe_exit(status) + ") before its ready line");
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()).count();
      if (left <= 0)
        fail("printed no ready line within " + std::to_string(ready_limit_s) + " s");
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100))) > 0) {
        char buf[512];
        const ssize_t n = ::read(out_fd_, buf, sizeof buf);
        if (n > 0)
          out_.append(buf, static_cast<size_t>(n));
        else if (n == 0)
          ::usleep(20000); // stdout closed: child_.alive above sees the exit
      }
    }
  }

  // The last lines of its stderr.
  std::string stderr_tail(size_t max_bytes = 4000) const {
    const off_t end = ::lseek(err_fd_, 0, SEEK_END);
    if (end <= 0)
      return "(nothing)";
    const off_t from = end > static_cast<off_t>(max_bytes) ? end - static_cast<off_t>(max_bytes) : 0;
    std::string text(static_cast<size_t>(end - from), '\0');
    const ssize_t n = ::pread(err_fd_, text.data(), text.size(), from);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (from > 0 && text.find('\n') != std::string::npos)
      text.erase(0, text.find('\n') + 1);
    return text;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw bench_failure("the " + role_ + " node (pid " + std::to_string(started_pid_) + ") " + what + "; its stderr ends:\n" +
                        stderr_tail());
  }

  // SIGTERM, up to stop_limit_s for the exit, then SIGKILL. Idempotent.
  void stop() {
    const pid_t pid = child_.pid();
    if (child_.stop(SIGTERM, stop_limit_s) == child_supervisor::stop_result::killed)
      std::cerr << "ordo bench pd: the " << role_ << " node (pid " << pid << ") did not exit within " << stop_limit_s
                << " s of SIGTERM; sent SIGKILL\n";
    for (int* fd : {&out_fd_, &err_fd_})
      if (*fd >= 0) {
        ::close(*fd);
        *fd = -1;
      }
  }

private:
  static std::string describe_exit(int status) {
    if (WIFEXITED(status))
      return "status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
      return std::string("signal ") + strsignal(WTERMSIG(status));
    return "status " + std::to_string(status);
  }

  std::string role_;
  child_supervisor child_;
  pid_t started_pid_ = -1; // for messages
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string endpoints_;
  int http_port_ = 0;
};

struct answer {
  double wall_ms = 0;
  json body;
  double server_ms() const { // the node's arrival → first token (duration with max_tokens 1)
    const json& o = body["ordo"];
    return o.contains("first_token_ms") ? o["first_token_ms"].get<double>() : o.value("duration_ms", 0.0);
  }
  std::string digest() const { return body["ordo"].value("logits_digest", std::string()); }
  int64_t from_peer() const { return body["ordo"].value("from", json::object()).value("peer", int64_t{0}); }
  int64_t resume_at() const { return body["ordo"].value("resume_at", int64_t{0}); }
};

// POST /v1/completions with `body` (max_tokens 1): the wall time of the exchange (connected
// before the clock starts) and the parsed answer, which must be 200 with an `ordo` object naming a logits digest.
answer complete(const node_process& node, const json& body, const std::string& what) {
  http_client c(node.http_port(), request_limit_s);
  const std::string text = body.dump();
  const auto t0 = clock_type::now();
  http_response r = c.request("POST", "/v1/completions", text);
  answer a;
  a.wall_ms = ms_since(t0);
  if (r.status != 200)
    node.fail("answered " + what + " with " +
              (r.status ? "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 400) : r.error));
  try {
    a.body = json::parse(r.body);
  } catch (const std::exception& e) {
    node.fail("answered " + what + " with a body that is not JSON (" + e.what() + ")");
  }
  if (!a.body.contains("ordo") || !a.body["ordo"].is_object() || a.digest().empty())
    node.fail("answered " + what + " without ordo.logits_digest");
  return a;
}

// The node's ordo_offload_bytes_total{direction="load"}: bytes loaded from a host tier, the
// peer's included. Throws when the series is missing, so a renamed metric cannot read as 0.
double bytes_loaded(const node_process& node) {
  http_client c(node.http_port(), request_limit_s);
  http_response r = c.request("GET", "/metrics");
  if (r.status != 200)
    node.fail("answered GET /metrics with " + (r.status ? "HTTP " + std::to_string(r.status) : r.error));
  std::vector<prometheus_sample> samples;
  std::string why;
  if (!parse_prometheus_samples(r.body, "ordo_offload_bytes_total", samples, why))
    node.fail("answered GET /metrics that cannot be read: " + why);
  for (const auto& s : samples)
    if (s.labels.size() == 1 && s.labels.count("direction") && s.labels.at("direction") == "load")
      return std::strtod(s.value.c_str(), nullptr);
  node.fail("has no ordo_offload_bytes_total{direction=\"load\"} in GET /metrics");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty())
    return 0;
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// One prompt length's measurements, one entry per repeat.
struct length_samples {
  int32_t tokens = 0;
  std::vector<double> single, single_server, prefill, prefill_server, decode, decode_server, pd, decode_only, bytes,
      from_peer, resume_at;
  std::string last_digest;
};

// The time one host→device copy of `bytes` takes on `dev` (a host memcpy on the CPU device): the
// time the bytes of a P/D transfer alone need on this machine. Copies of that size are enqueued
// back to back, at least 64 MiB in all, so one synchronize's latency does not stand in for the
// bytes of a small transfer; best of `repeats` such rounds, divided by the copies in a round.
double copy_seconds(device& dev, uint8_t* host, void* dst, size_t bytes, int32_t repeats) {
  const size_t copies = std::max<size_t>(1, ((size_t{64} << 20) + bytes - 1) / bytes);
  double best = 1e30;
  for (int32_t i = 0; i < std::max(repeats, 1); ++i) {
    dev.synchronize();
    const auto t0 = clock_type::now();
    for (size_t c = 0; c < copies; ++c)
      dev.copy_async(stream_kind::load, dst, host, bytes);
    dev.synchronize();
    best = std::min(best, ms_since(t0) / 1e3);
  }
  return best / static_cast<double>(copies);
}

} // namespace

int run_bench_pd(const bench_pd_options& o) {
  spdlog::set_level(spdlog::level::warn);
  if (o.repeats < 1 || o.prompt_tokens.empty()) {
    std::cerr << "ordo bench pd: --repeats must be at least 1 and --prompt-tokens needs a value\n";
    return 2;
  }
  for (int32_t n : o.prompt_tokens)
    if (n < 1) {
      std::cerr << "ordo bench pd: --prompt-tokens " << n << ": must be at least 1\n";
      return 2;
    }
  // Every node's command line: quiet logs unless the user says otherwise, the user's overrides,
  // then what makes a node the prefill or the decode side.
  const std::vector<std::string> common = [&] {
    std::vector<std::string> sets = {"log.level=warn"};
    sets.insert(sets.end(), o.overrides.begin(), o.overrides.end());
    return sets;
  }();
  const std::vector<std::string> prefill_sets = {"kv_transfer.connector=pd", "kv_transfer.kv_role=kv_producer"};
  const std::vector<std::string> decode_sets = {"kv_transfer.connector=pd", "kv_transfer.kv_role=kv_consumer"};
  node_config cfg;
  try {
    cfg = load_config_file(o.config_path, common);
    for (const std::vector<std::string>* role_sets : {&prefill_sets, &decode_sets}) {
      auto sets = common;
      sets.insert(sets.end(), role_sets->begin(), role_sets->end());
      load_config_file(o.config_path, sets);
    }
  } catch (const std::exception& e) {
    std::cerr << "ordo bench pd: invalid config: " << e.what() << "\n";
    return 2;
  }
  auto node_args = [&](const std::vector<std::string>& role_sets) {
    std::vector<std::string> args = {"ordo", "node", "--config", o.config_path, "--port", "0"};
    for (const std::vector<std::string>* sets : {&common, &role_sets})
      for (const auto& s : *sets) {
        args.push_back("--set");
        args.push_back(s);
      }
    return args;
  };

  std::vector<length_samples> rows;
  std::string device_name;
  double copy_gbps_best = 0;
  std::vector<double> floor_s;
  try {
    {
      // All three start at once; declared in this block so that every one is stopped (by pid)
      // before the copy baseline runs, on errors too.
      node_process ref("reference", node_args({}));
      node_process pre("prefill", node_args(prefill_sets));
      node_process dec("decode", node_args(decode_sets));
      const auto until = clock_type::now() + std::chrono::seconds(ready_limit_s);
      for (node_process* n : {&ref, &pre, &dec})
        n->wait_ready(until);
      std::printf("nodes: reference pid %d %s, prefill pid %d %s, decode pid %d %s\n", ref.pid(),
                  ref.endpoints().c_str(), pre.pid(), pre.endpoints().c_str(), dec.pid(), dec.endpoints().c_str());
      std::fflush(stdout);

      auto request = [](const std::vector<int32_t>& prompt) {
        return json{{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
      };
      // Prompt `seed` of `tokens` through the reference node and the P/D pair (checked against the
      // reference's answer), and prompt ~seed through the decode node alone.
      auto measure = [&](int32_t tokens, uint64_t seed, length_samples& s, bool record) {
        const std::vector<int32_t> prompt = seeded_prompt(tokens, seed);
        const std::string what = "a prompt of " + std::to_string(prompt.size()) + " tokens";
        answer single = complete(ref, request(prompt), what);
        json pbody = request(prompt);
        pbody["kv_transfer_params"] = {{"do_remote_decode", true}};
        answer prefill = complete(pre, pbody, what + " (do_remote_decode)");
        if (!prefill.body.contains("kv_transfer_params") || !prefill.body["kv_transfer_params"].is_object())
          pre.fail("answered " + what + " with do_remote_decode but without kv_transfer_params");
        if (prefill.digest() != single.digest())
          throw bench_failure("prompt of " + std::to_string(prompt.size()) + " tokens: the prefill node's digest " +
                              prefill.digest() + " differs from the reference node's " + single.digest());
        // The series exists once the node has served a request: the warm-up reads none.
        const double loaded_before = record ? bytes_loaded(dec) : 0;
        json dbody = request(prompt);
        dbody["kv_transfer_params"] = prefill.body["kv_transfer_params"]; // unchanged, whatever it holds
        answer decode = complete(dec, dbody, what + " with the prefill's kv_transfer_params");
        if (decode.from_peer() <= 0)
          throw bench_failure("prompt of " + std::to_string(prompt.size()) +
                              " tokens: the decode node took nothing from the prefill node (ordo.from.peer = 0; " +
                              "reason: " + decode.body["ordo"].value("reason", std::string("none")) + ")");
        if (decode.digest() != single.digest())
          throw bench_failure("prompt of " + std::to_string(prompt.size()) + " tokens: the decode node's digest " +
                              decode.digest() + " differs from the reference node's " + single.digest() +
                              " (from.peer " + std::to_string(decode.from_peer()) + ")");
        // The counter is published after the scheduler's loop turn: poll briefly for the load.
        double loaded = record ? bytes_loaded(dec) - loaded_before : 1;
        for (int i = 0; i < 50 && loaded <= 0; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          loaded = bytes_loaded(dec) - loaded_before;
        }
        if (loaded <= 0)
          dec.fail("reports no bytes loaded for " + what + " although ordo.from.peer = " +
                   std::to_string(decode.from_peer()));
        // Decode-only: the decode node recomputing a fresh prompt of the same length itself.
        answer alone = complete(dec, request(seeded_prompt(tokens, ~seed)), what + " (decode-only)");
        if (alone.from_peer() != 0)
          dec.fail("took " + std::to_string(alone.from_peer()) + " tokens from a peer for a request without one");
        if (!record)
          return;
        s.single.push_back(single.wall_ms);
        s.single_server.push_back(single.server_ms());
        s.prefill.push_back(prefill.wall_ms);
        s.prefill_server.push_back(prefill.server_ms());
        s.decode.push_back(decode.wall_ms);
        s.decode_server.push_back(decode.server_ms());
        s.pd.push_back(prefill.wall_ms + decode.wall_ms);
        s.decode_only.push_back(alone.wall_ms);
        s.bytes.push_back(loaded);
        s.from_peer.push_back(static_cast<double>(decode.from_peer()));
        s.resume_at.push_back(static_cast<double>(decode.resume_at()));
        s.last_digest = single.digest();
      };

      // Warm-up (first requests of each node: thread start, page faults), untimed.
      length_samples warm;
      measure(std::min(o.prompt_tokens.front(), 256), 0x77617277, warm, false);
      for (size_t li = 0; li < o.prompt_tokens.size(); ++li) {
        length_samples s;
        s.tokens = o.prompt_tokens[li];
        for (int32_t r = 0; r < o.repeats; ++r)
          measure(s.tokens, (static_cast<uint64_t>(li) << 32) + static_cast<uint64_t>(r) + 1, s, true);
        rows.push_back(std::move(s));
      }
    } // the nodes stop here

    // The floor: the median pulled bytes of each length through host→device copies of that size.
    auto dev = make_configured_device(cfg);
    device_name = dev->name();
    size_t max_bytes = 0;
    for (const auto& s : rows)
      max_bytes = std::max(max_bytes, static_cast<size_t>(median(s.bytes)));
    auto* host = static_cast<uint8_t*>(dev->alloc_host_pinned(max_bytes));
    void* dst = dev->alloc_device(max_bytes);
    std::memset(host, 1, max_bytes); // first touch and the first copy stay out of the timing
    dev->copy_async(stream_kind::load, dst, host, max_bytes);
    dev->synchronize();
    for (const auto& s : rows) {
      const double seconds = copy_seconds(*dev, host, dst, static_cast<size_t>(median(s.bytes)), copy_repeats);
      floor_s.push_back(seconds);
      copy_gbps_best = std::max(copy_gbps_best, median(s.bytes) / seconds / 1e9);
    }
    dev->free_device(dst);
    dev->free_host_pinned(host);
  } catch (const std::exception& e) {
    std::cerr << "ordo bench pd: " << e.what() << "\n";
    return 1;
  }

  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::printf("ordo bench pd: %s/%s kv %s block %d chunk %d on %s | median of %d, wall ms per request\n",
              to_string(cfg.preset), to_string(cfg.size), to_string(cfg.kv), cfg.block_size, cfg.chunk_size,
              device_name.c_str(), o.repeats);
  std::printf("%8s %10s %11s %10s %10s %10s %12s %10s %10s %9s %10s %12s\n", "tokens", "single ms", "prefill ms",
              "decode ms", "P/D ms", "P/D/single", "decode-only", "pulled MB", "from peer", "floor ms", "copy GB/s",
              "decode/floor");
  json jrows = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& s = rows[i];
    const double single = median(s.single), pd = median(s.pd), decode = median(s.decode);
    const double bytes = median(s.bytes), floor_ms = floor_s[i] * 1e3;
    std::printf("%8d %10.2f %11.2f %10.2f %10.2f %10.3f %12.2f %10.3f %10.0f %9.3f %10.2f %12.1f\n", s.tokens, single,
                median(s.prefill), decode, pd, ratio(pd, single), median(s.decode_only), bytes / 1e6,
                median(s.from_peer), floor_ms, bytes / floor_s[i] / 1e9, ratio(decode, floor_ms));
    jrows.push_back({{"prompt_tokens", s.tokens},
                     {"single_ms", single},
                     {"single_server_ms", median(s.single_server)},
                     {"prefill_ms", median(s.prefill)},
                     {"prefill_server_ms", median(s.prefill_server)},
                     {"decode_ms", decode},
                     {"decode_server_ms", median(s.decode_server)},
                     {"pd_ms", pd},
                     {"pd_over_single", ratio(pd, single)},
                     {"decode_only_ms", median(s.decode_only)},
                     {"bytes_pulled", bytes},
                     {"from_peer", median(s.from_peer)},
                     {"resume_at", median(s.resume_at)},
                     {"floor_ms", floor_ms},
                     {"copy_gbps", bytes / floor_s[i] / 1e9},
                     {"decode_over_floor", ratio(decode, floor_ms)},
                     {"digest", s.last_digest}});
  }
  std::printf("P/D = prefill + decode (the decode node pulls the KV and state from the prefill node); floor = "
              "pulled bytes / host->device copies of as many bytes (best of %d); every decode answer had "
              "from.peer > 0 and the reference node's digest\n",
              copy_repeats);
  json j = {{"bench", "pd"},
            {"config", o.config_path},
            {"overrides", o.overrides},
            {"preset", to_string(cfg.preset)},
            {"size", to_string(cfg.size)},
            {"kv_dtype", to_string(cfg.kv)},
            {"block_size", cfg.block_size},
            {"chunk_size", cfg.chunk_size},
            {"device", device_name},
            {"repeats", o.repeats},
            {"copy_gbps_best", copy_gbps_best},
            {"rows", jrows}};
  std::printf("BENCH_JSON %s\n", j.dump().c_str());
  return 0;
}

} // namespace ordo
