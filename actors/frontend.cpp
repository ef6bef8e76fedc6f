#include "actors/frontend.hpp"

#include <chrono>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/tokenizer.hpp"

namespace ordo {

void http_bridge::put(uint64_t id, pending p) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[id] = std::move(p);
}

http_bridge::pending http_bridge::take(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end())
    return {};
  auto p = std::move(it->second);
  entries_.erase(it);
  return p;
}

http_bridge::pending http_bridge::peek(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  return it == entries_.end() ? pending{} : it->second;
}

size_t http_bridge::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

namespace {

constexpr const char* json_type = "application/json";

void send_error(const std::shared_ptr<http_responder>& r, const api_error& e, const frontend_options& opt) {
  if (opt.on_error)
    opt.on_error(e.status);
  r->send(e.status, json_type, render_error(e));
}

struct frontend_state {
  scheduler_actor scheduler;
  std::shared_ptr<http_bridge> bridge;
  frontend_options options;
  static inline const char* name = "frontend";
};

frontend_actor::behavior_type frontend(frontend_actor::stateful_pointer<frontend_state> self, scheduler_actor scheduler,
                                       std::shared_ptr<http_bridge> bridge, frontend_options options) {
  self->state.scheduler = std::move(scheduler);
  self->state.bridge = std::move(bridge);
  self->state.options = std::move(options);
  return {
    [=](completion_request& request) { self->send(self->state.scheduler, std::move(request)); },
    [=](evict_request& request) { self->send(self->state.scheduler, std::move(request)); },
    [=](const completion_chunk& chunk) {
      auto p = self->state.bridge->peek(chunk.request_id);
      if (!p.responder || !p.stream)
        return;
      p.responder->write(render_stream_chunk(chunk.request_id, byte_tokenizer::decode_one(chunk.token_id),
                                             chunk.token_id, self->state.options.model_name, p.created));
    },
    [=](const completion_result& result) {
      auto p = self->state.bridge->take(result.request_id);
      if (!p.responder)
        return;
      const auto& name = self->state.options.model_name;
      if (p.stream) {
        p.responder->write(render_stream_final(result, name, p.created));
        p.responder->write(render_stream_done());
        p.responder->end_stream();
      } else {
        p.responder->send(200, json_type,
                          render_completion(result, byte_tokenizer::decode(result.token_ids), name, p.created));
      }
    },
    [=](const completion_failed& failed) {
      auto p = self->state.bridge->take(failed.request_id);
      if (!p.responder)
        return;
      auto e = to_api_error(failed);
      if (self->state.options.on_error)
        self->state.options.on_error(e.status);
      if (p.stream) {
        p.responder->write(render_stream_error(e));
        p.responder->write(render_stream_done());
        p.responder->end_stream();
      } else {
        p.responder->send(e.status, json_type, render_error(e));
      }
    },
    [=](const evict_result& result) {
      auto p = self->state.bridge->take(result.request_id);
      if (!p.responder)
        return;
      // hbm: blocks (their checkpoints go with them); cpu: host-tier objects.
      nlohmann::json body = {{"tier", result.tier},
                             {result.tier == "cpu" ? "evicted_objects" : "evicted_blocks", result.num_blocks}};
      p.responder->send(200, json_type, body.dump());
    },
  };
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

} // namespace

frontend_actor spawn_frontend(caf::actor_system& sys, scheduler_actor scheduler, std::shared_ptr<http_bridge> bridge,
                              frontend_options options) {
  return sys.spawn(frontend, std::move(scheduler), std::move(bridge), std::move(options));
}

http_server::handler make_http_handler(frontend_actor fe, std::shared_ptr<http_bridge> bridge,
                                       frontend_options opt, std::shared_ptr<std::atomic<bool>> draining) {
  return [fe, bridge, opt, draining](http_request req, std::shared_ptr<http_responder> res) {
    auto method_not_allowed = [&](const char* allowed) {
      send_error(res, {405, "method " + req.method + " is not allowed on " + req.path + "; use " + allowed,
                       "invalid_request_error"},
                 opt);
    };
    if (req.path == "/health") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      nlohmann::json body = {{"status", draining->load() ? "draining" : "ok"}};
      return res->send(200, json_type, body.dump());
    }
    if (req.path == "/metrics") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      return res->send(200, "text/plain; version=0.0.4", opt.render_metrics ? opt.render_metrics() : "");
    }
    if (req.path == "/v1/completions") {
      if (req.method != "POST")
        return method_not_allowed("POST");
      if (draining->load())
        return send_error(res, {503, "the node is shutting down", "server_error"}, opt);
      auto parsed = parse_completion_request(req.body, opt.limits);
      if (auto* e = std::get_if<api_error>(&parsed))
        return send_error(res, *e, opt);
      auto request = std::get<completion_request>(std::move(parsed));
      request.request_id = bridge->next_id();
      http_bridge::pending p{res, request.stream, unix_seconds()};
      if (request.stream)
        res->start_stream(200, "text/event-stream");
      bridge->put(request.request_id, std::move(p));
      caf::anon_send(fe, std::move(request));
      return;
    }
    if (req.path == "/admin/evict") {
      if (req.method != "POST")
        return method_not_allowed("POST");
      auto parsed = parse_evict_request(req.body);
      if (auto* e = std::get_if<api_error>(&parsed))
        return send_error(res, *e, opt);
      evict_request request{bridge->next_id(), std::get<std::string>(parsed)};
      bridge->put(request.request_id, {res, false, unix_seconds()});
      caf::anon_send(fe, std::move(request));
      return;
    }
    send_error(res, {404, "no route for " + req.method + " " + req.path +
                              "; try POST /v1/completions, GET /health, GET /metrics, POST /admin/evict",
                     "not_found_error"},
               opt);
  };
}

} // namespace ordo
