// `ordo proxy` (docs/proxy.md): an OpenAI-compatible front that runs the prefill/decode flow of
// vLLM's toy P/D proxy per request.
//
// Threads: the HTTP server's loop thread runs the handler, which only routes and posts a job; a
// pool of `num_workers` threads makes the blocking upstream calls (below) and answers through the
// thread-safe http_responder; one prober thread refreshes /health's state; main waits for a signal.
#include "tools/proxy/proxy.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/net/http_client.hpp"
#include "actors/net/http_server.hpp"
#include "runtime/metrics.hpp"
#include "runtime/worker_pool.hpp"
#include "tools/process_signals.hpp"
#include "tools/proxy/proxy_config.hpp"

namespace ordo {

namespace {

using clock_type = std::chrono::steady_clock;
using header_list = http_header_list;
constexpr const char* json_type = "application/json";
constexpr int num_workers = 8;            // upstream calls in flight at once; more requests queue
constexpr int probe_interval_s = 5;       // /health's state: every upstream's GET /health
constexpr int probe_timeout_s = 2;
constexpr int drain_grace_s = 5;          // beyond timeout_s, before in-flight calls are cut

// --- one upstream call, through the one HTTP client (actors/net/http_client.hpp) ---------------

struct upstream_call {
  const proxy_endpoint* endpoint = nullptr;
  std::string method = "POST";
  std::string path;
  std::string body;
  std::string authorization; // forwarded as it came, "" for none
  int timeout_s = 120;       // the whole call: connect, send, the answer
  std::function<bool()> cancelled; // polled every slice; true aborts the call
  // Called once the head is read; returning true routes the body to on_piece as it arrives.
  std::function<bool(const http_response&)> stream_body;
  std::function<void(const std::string&)> on_piece;
};

// status 0 (with error) unless the whole answer arrived; a streamed one sets `started`.
http_response http_call(const upstream_call& call) {
  http_client c(call.endpoint->host, call.endpoint->port, {call.timeout_s, true, call.cancelled});
  http_response r;
  http_header_list headers = {{"Connection", "close"}, {"Accept", "*/*"}};
  if (!call.authorization.empty())
    headers.emplace_back("Authorization", call.authorization);
  if (!c.connected() || !c.send_request(call.method, call.path, call.body, "application/json", headers)) {
    r.error = c.error();
    return r;
  }
  bool streaming = false;
  r = c.read_response(
      [&](const std::string& piece) {
        if (streaming && call.on_piece)
          call.on_piece(piece);
        return true;
      },
      [&](const http_response& head) { return streaming = call.stream_body && call.stream_body(head); });
  if (!r.error.empty())
    r.status = 0;
  return r;
}

// --- state ------------------------------------------------------------------------------------

struct endpoint_state {
  proxy_endpoint endpoint;
  std::atomic<bool> ok{false};
  std::atomic<bool> known{false};
  std::mutex mutex;
  std::string error; // the last failure, "" while ok

  void mark(bool good, const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    ok = good;
    known = true;
    error = good ? "" : why;
  }
  nlohmann::json to_json() {
    std::lock_guard<std::mutex> lock(mutex);
    nlohmann::json j = {{"endpoint", endpoint.text}, {"ok", ok.load()}};
    if (!known)
      j["error"] = "not checked yet";
    else if (!ok)
      j["error"] = error;
    return j;
  }
};

struct endpoint_pool {
  std::vector<std::unique_ptr<endpoint_state>> nodes;
  std::atomic<uint64_t> next{0};

  // Every node once, starting at the next one in round-robin order.
  std::vector<endpoint_state*> order() {
    std::vector<endpoint_state*> out;
    if (nodes.empty())
      return out;
    const uint64_t first = next.fetch_add(1, std::memory_order_relaxed);
    for (size_t i = 0; i < nodes.size(); ++i)
      out.push_back(nodes[(first + i) % nodes.size()].get());
    return out;
  }
  nlohmann::json to_json() {
    nlohmann::json a = nlohmann::json::array();
    for (auto& n : nodes)
      a.push_back(n->to_json());
    return a;
  }
};

struct proxy_metrics {
  metrics_registry registry;
  metric_counter* outcome_pd;
  metric_counter* outcome_decode_only;
  metric_counter* outcome_no_decode;
  metric_counter* outcome_cancelled;
  metric_counter* outcome_rejected;
  metric_counter* prefill_failures;
  metric_counter* decode_failures;
  metric_counter* client_kv_params_dropped;
  metric_gauge* in_flight;
  metric_histogram* prefill_seconds;
  metric_histogram* decode_seconds;

  proxy_metrics() {
    const std::string req_help =
        "Client requests by outcome: pd (prefill then decode), decode_only (no prefill node answered or none is "
        "configured), no_decode (502: no decode node answered), cancelled (the client left), rejected (401, 404, "
        "405 or 503 from the proxy itself)";
    auto outcome = [&](const char* o) { return &registry.counter("ordo_proxy_requests_total", req_help, {{"outcome", o}}); };
    outcome_pd = outcome("pd");
    outcome_decode_only = outcome("decode_only");
    outcome_no_decode = outcome("no_decode");
    outcome_cancelled = outcome("cancelled");
    outcome_rejected = outcome("rejected");
    prefill_failures = &registry.counter(
        "ordo_proxy_prefill_failures_total",
        "Prefill attempts that got no 2xx answer (connection refused, timeout, non-2xx); each node tried counts");
    decode_failures = &registry.counter("ordo_proxy_decode_failures_total",
                                        "Decode attempts that got no answer (connection refused, timeout, cut off)");
    client_kv_params_dropped = &registry.counter(
        "ordo_proxy_client_kv_params_dropped_total",
        "Client requests whose own kv_transfer_params the proxy dropped (a client chooses no peer)");
    in_flight = &registry.gauge("ordo_proxy_requests_in_flight", "Client requests being proxied now");
    const auto buckets = exponential_buckets(0.005, 2.0, 16); // 5 ms .. ~164 s
    const std::string up_help = "Seconds of one upstream request (a streamed decode: until its last byte)";
    prefill_seconds = &registry.histogram("ordo_proxy_upstream_seconds", up_help, buckets, {{"role", "prefill"}});
    decode_seconds = &registry.histogram("ordo_proxy_upstream_seconds", up_help, buckets, {{"role", "decode"}});
  }
};

struct proxy_state {
  proxy_config cfg;
  endpoint_pool prefill;
  endpoint_pool decode;
  proxy_metrics metrics;
  std::atomic<bool> draining{false};
  std::atomic<bool> abort{false}; // cuts every upstream call (a drain that ran out of time)
};


double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Headers of the decode node's answer the client also gets (besides the content type).
header_list passed_headers(const http_response& r) {
  header_list out;
  for (const auto& [k, v] : r.headers)
    if (k == "retry-after" || k == "www-authenticate")
      out.emplace_back(k == "retry-after" ? "Retry-After" : "WWW-Authenticate", v);
  return out;
}

// The prefill request of vLLM's toy P/D proxy: one token, not streamed, asking for remote decode.
std::string prefill_body(const nlohmann::json& original) {
  nlohmann::json p = original;
  p["max_tokens"] = 1;
  if (p.contains("max_completion_tokens"))
    p["max_completion_tokens"] = 1;
  p["stream"] = false;
  p.erase("stream_options");
  p["kv_transfer_params"] = {{"do_remote_decode", true}, {"do_remote_prefill", false}};
  return p.dump();
}

// One /v1/completions or /v1/chat/completions request, on a worker thread.
void run_pd(const std::shared_ptr<proxy_state>& st, const http_request& req, const std::shared_ptr<http_responder>& res) {
  const proxy_config& cfg = st->cfg;
  auto& m = st->metrics;
  const std::string auth = req.header("authorization");
  auto cancelled = [st, res] { return st->abort.load() || res->closed(); };

  // Step 1: prefill (skipped for a body that is not a JSON object: the decode node explains).
  nlohmann::json original;
  try {
    original = nlohmann::json::parse(req.body);
  } catch (const std::exception&) {
    original = nullptr;
  }
  // One upstream request of this client request: its path, its Authorization, the deadline.
  auto call_to = [&](endpoint_state* node, const std::string& body) {
    upstream_call call;
    call.endpoint = &node->endpoint;
    call.path = req.path;
    call.body = body;
    call.authorization = auth;
    call.timeout_s = static_cast<int>(cfg.timeout_s);
    call.cancelled = cancelled;
    return call;
  };
  const bool is_object = original.is_object();
  // A client chooses no peer (docs/security.md): its own kv_transfer_params never reach a node;
  // the decode node gets only what the prefill node answered (signed).
  const bool client_chose_peer = is_object && original.contains("kv_transfer_params");
  if (client_chose_peer) {
    original.erase("kv_transfer_params");
    m.client_kv_params_dropped->inc();
  }
  // Unchanged bytes unless the client's own parameters had to go.
  std::string decode_body = client_chose_peer ? original.dump() : req.body;
  bool prefilled = false;
  if (is_object && !st->prefill.nodes.empty()) {
    const std::string pbody = prefill_body(original);
    for (endpoint_state* node : st->prefill.order()) {
      if (cancelled())
        break;
      const auto t0 = clock_type::now();
      http_response r = http_call(call_to(node, pbody));
      m.prefill_seconds->observe(seconds_since(t0));
      if (r.status >= 200 && r.status < 300) {
        node->mark(true, "");
        prefilled = true;
        nlohmann::json answer;
        try {
          answer = nlohmann::json::parse(r.body);
        } catch (const std::exception&) {
          answer = nullptr;
        }
        // Only signed parameters travel on: a decode node would refuse any others (runtime/pd_params.hpp).
        if (answer.is_object() && answer.contains("kv_transfer_params") && answer["kv_transfer_params"].is_object() &&
            answer["kv_transfer_params"].contains("signature") &&
            answer["kv_transfer_params"]["signature"].is_string()) {
          nlohmann::json d = original;
          d["kv_transfer_params"] = answer["kv_transfer_params"];
          decode_body = d.dump();
        }
        spdlog::debug("ordo proxy: {} prefilled on {}", req.path, node->endpoint.text);
        break;
      }
      if (cancelled())
        break;
      m.prefill_failures->inc();
      const std::string why = r.status ? "answered " + std::to_string(r.status) : r.error;
      if (r.status == 0)
        node->mark(false, why);
      spdlog::warn("ordo proxy: prefill on {} failed: {}", node->endpoint.text, why);
    }
  }

  // Step 2: decode; the first node that answers at all gives the client its answer.
  std::vector<std::string> tried;
  const bool want_stream =
      is_object && original.contains("stream") && original["stream"].is_boolean() && original["stream"].get<bool>();
  for (endpoint_state* node : st->decode.order()) {
    if (cancelled())
      break;
    const auto t0 = clock_type::now();
    upstream_call call = call_to(node, decode_body);
    bool streamed = false;
    // A 2xx SSE answer is passed on as it arrives; anything else is buffered and sent whole.
    call.stream_body = [&](const http_response& head) {
      if (!want_stream || head.status < 200 || head.status >= 300 ||
          head.header("content-type").find("text/event-stream") == std::string::npos)
        return false;
      streamed = true;
      res->start_stream(head.status, head.header("content-type"));
      return true;
    };
    call.on_piece = [&](const std::string& piece) { res->write(piece); };
    http_response r = http_call(call);
    m.decode_seconds->observe(seconds_since(t0));
    if (r.status > 0) {
      node->mark(true, "");
      (prefilled ? m.outcome_pd : m.outcome_decode_only)->inc();
      if (streamed)
        res->end_stream();
      else {
        std::string ct = r.header("content-type");
        res->send(r.status, ct.empty() ? json_type : ct, std::move(r.body), passed_headers(r));
      }
      return;
    }
    if (cancelled()) {
      if (streamed)
        res->end_stream();
      break;
    }
    m.decode_failures->inc();
    node->mark(false, r.error);
    spdlog::warn("ordo proxy: decode on {} failed: {}", node->endpoint.text, r.error);
    if (streamed) { // the stream reached the client: it cannot move to another node; end it
      m.outcome_no_decode->inc();
      res->end_stream();
      return;
    }
    tried.push_back(node->endpoint.text + " (" + r.error + ")");
  }
  if (cancelled()) {
    m.outcome_cancelled->inc();
    if (st->abort.load())
      res->send(503, json_type, write_error_body(503, "the proxy is shutting down", "server_error"));
    return;
  }
  m.outcome_no_decode->inc();
  std::string names;
  for (size_t i = 0; i < tried.size(); ++i)
    names += (i ? ", " : "") + tried[i];
  res->send(502, json_type, write_error_body(502, "no decode node answered; tried " + names, "server_error"));
}

// GET /v1/models: the first decode node that answers.
void run_models(const std::shared_ptr<proxy_state>& st, const http_request& req,
                const std::shared_ptr<http_responder>& res) {
  std::vector<std::string> tried;
  for (endpoint_state* node : st->decode.order()) {
    upstream_call call;
    call.endpoint = &node->endpoint;
    call.method = "GET";
    call.path = req.path;
    call.authorization = req.header("authorization");
    call.timeout_s = static_cast<int>(st->cfg.timeout_s);
    call.cancelled = [st, res] { return st->abort.load() || res->closed(); };
    http_response r = http_call(call);
    if (r.status > 0) {
      std::string ct = r.header("content-type");
      return res->send(r.status, ct.empty() ? json_type : ct, std::move(r.body), passed_headers(r));
    }
    tried.push_back(node->endpoint.text + " (" + r.error + ")");
  }
  std::string names;
  for (size_t i = 0; i < tried.size(); ++i)
    names += (i ? ", " : "") + tried[i];
  res->send(502, json_type, write_error_body(502, "no decode node answered; tried " + names, "server_error"));
}

http_server::handler proxy_handler(std::shared_ptr<proxy_state> st, std::shared_ptr<worker_pool> workers) {
  return [st, workers](http_request req, std::shared_ptr<http_responder> res) {
    auto& m = st->metrics;
    auto fail = [&](int status, const std::string& message, const char* type, header_list headers = {}) {
      m.outcome_rejected->inc();
      res->send(status, json_type, write_error_body(status, message, type), std::move(headers));
    };
    auto method_not_allowed = [&](const char* allowed) {
      fail(405, "method " + req.method + " is not allowed on " + req.path + "; use " + allowed,
           "invalid_request_error", {{"Allow", allowed}});
    };
    const bool api = req.path.compare(0, 4, "/v1/") == 0;
    if (api && !st->cfg.api_key.empty() && !has_bearer(req, st->cfg.api_key))
      return fail(401, "missing or wrong API key: send the header Authorization: Bearer <proxy.api_key>",
                  "authentication_error", {{"WWW-Authenticate", "Bearer"}});
    if (req.path == "/health") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      nlohmann::json body = {{"status", st->draining.load() ? "draining" : "ok"},
                             {"prefill", st->prefill.to_json()},
                             {"decode", st->decode.to_json()}};
      return res->send(200, json_type, body.dump());
    }
    if (req.path == "/metrics") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      return res->send(200, "text/plain; version=0.0.4", m.registry.render_prometheus());
    }
    const bool completion = req.path == "/v1/completions" || req.path == "/v1/chat/completions";
    if (completion || req.path == "/v1/models") {
      if (req.method != (completion ? "POST" : "GET"))
        return method_not_allowed(completion ? "POST" : "GET");
      if (st->draining.load())
        return fail(503, "the proxy is shutting down", "server_error");
      if (!completion)
        return workers->post([st, req = std::move(req), res] { run_models(st, req, res); });
      m.in_flight->inc();
      workers->post([st, req = std::move(req), res] {
        run_pd(st, req, res);
        st->metrics.in_flight->dec();
      });
      return;
    }
    fail(404,
         "no route for " + req.method + " " + req.path +
             "; try POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics",
         "not_found_error");
  };
}

// Refreshes every upstream's state for /health: GET /health, every probe_interval_s.
class prober {
public:
  explicit prober(std::shared_ptr<proxy_state> st) : st_(std::move(st)) {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!stopping_) {
        lock.unlock();
        probe_all();
        lock.lock();
        wake_.wait_for(lock, std::chrono::seconds(probe_interval_s), [this] { return stopping_; });
      }
    });
  }
  ~prober() { stop(); }
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }

private:
  void probe_all() {
    for (auto* pool : {&st_->prefill, &st_->decode})
      for (auto& node : pool->nodes) {
        upstream_call call;
        call.endpoint = &node->endpoint;
        call.method = "GET";
        call.path = "/health";
        call.timeout_s = static_cast<int>(std::min<int64_t>(probe_timeout_s, st_->cfg.timeout_s));
        call.cancelled = [this] {
          std::lock_guard<std::mutex> lock(mutex_);
          return stopping_;
        };
        http_response r = http_call(call);
        if (r.error == "cancelled")
          return;
        if (r.status >= 200 && r.status < 300)
          node->mark(true, "");
        else
          node->mark(false, r.status ? "GET /health answered " + std::to_string(r.status) : r.error);
      }
  }

  std::shared_ptr<proxy_state> st_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

std::string endpoints_text(const std::vector<proxy_endpoint>& eps) {
  std::string s;
  for (size_t i = 0; i < eps.size(); ++i)
    s += (i ? "," : "") + eps[i].text;
  return s.empty() ? "(none)" : s;
}

} // namespace

int run_proxy(const std::string& config_path, const std::vector<std::string>& sets, std::optional<int> port) {
  auto signals = block_process_signals(); // before any thread starts

  auto st = std::make_shared<proxy_state>();
  try {
    auto overrides = sets;
    if (port)
      overrides.push_back("proxy.port=" + std::to_string(*port));
    st->cfg = load_proxy_config_file(config_path, overrides);
  } catch (const std::exception& e) {
    std::cerr << "ordo proxy: invalid config: " << e.what() << "\n";
    return 2;
  }
  const proxy_config& cfg = st->cfg;
  spdlog::set_level(spdlog::level::from_str(cfg.log_level));
  for (const auto& e : cfg.prefill) {
    st->prefill.nodes.push_back(std::make_unique<endpoint_state>());
    st->prefill.nodes.back()->endpoint = e;
  }
  for (const auto& e : cfg.decode) {
    st->decode.nodes.push_back(std::make_unique<endpoint_state>());
    st->decode.nodes.back()->endpoint = e;
  }

  auto workers = std::make_shared<worker_pool>(num_workers);
  http_server_options http_opt;
  http_opt.host = cfg.host;
  http_opt.port = cfg.port;
  http_server http(http_opt, proxy_handler(st, workers));
  int bound = 0;
  try {
    bound = http.start();
  } catch (const std::exception& e) {
    std::cerr << "ordo proxy: cannot listen on http://" << cfg.host << ":" << cfg.port << " (proxy.port = " << cfg.port
              << "): " << e.what() << "\n";
    workers->stop();
    return 1;
  }
  prober probe(st);
  spdlog::info("ordo proxy: prefill {}, decode {}, timeout {} s{}", endpoints_text(cfg.prefill),
               endpoints_text(cfg.decode), cfg.timeout_s, cfg.api_key.empty() ? "" : ", API key required");
  std::cout << "listening on http://" << cfg.host << ":" << bound << std::endl;

  int sig = wait_for_stop_signal(signals, "ordo proxy", "no reload: the config is read at start; SIGINT or SIGTERM stops the proxy");
  spdlog::info("ordo proxy: {}: draining in-flight requests", signal_name(sig));
  st->draining = true;
  http.stop_accepting();
  const auto limit = clock_type::now() + std::chrono::seconds(cfg.timeout_s + drain_grace_s);
  while (http.num_in_flight() > 0 && clock_type::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (http.num_in_flight() > 0) {
    spdlog::warn("ordo proxy: {} request(s) still in flight after {} s: cutting them", http.num_in_flight(),
                 cfg.timeout_s + drain_grace_s);
    st->abort = true;
  }
  probe.stop();
  workers->stop();
  http.stop();
  spdlog::info("ordo proxy: stopped");
  return 0;
}

} // namespace ordo
