#include "actors/frontend.hpp"

#include <arpa/inet.h>

#include <chrono>
#include <map>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "runtime/tokenizer.hpp"
#include "runtime/utf8.hpp"

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

// Every error the frontend answers goes through here, so each is counted once.
void send_error(http_responder& r, const api_error& e, const frontend_options& opt) {
  if (opt.on_error)
    opt.on_error(e.status);
  std::vector<std::pair<std::string, std::string>> headers;
  if (e.status == 429)
    headers.emplace_back("Retry-After", "1");
  if (e.status == 401)
    headers.emplace_back("WWW-Authenticate", "Bearer");
  r.send(e.status, json_type, render_error(e), std::move(headers));
}

struct frontend_state {
  scheduler_actor scheduler;
  std::shared_ptr<http_bridge> bridge;
  frontend_options options;
  // Streams started, with the bytes of a UTF-8 sequence still open and the tokens that carry them.
  struct stream_text {
    std::string pending;
    std::vector<int32_t> tokens;
  };
  std::map<uint64_t, stream_text> streams;
  door io;
  static inline const char* name = "frontend";
};

using frontend_ptr = frontend_actor::stateful_pointer<frontend_state>;

// The 200 and the SSE headers of a streamed request, sent with its first chunk or its result.
frontend_state::stream_text& start_stream_once(frontend_ptr self, uint64_t id, const http_bridge::pending& p) {
  auto [it, fresh] = self->state.streams.try_emplace(id);
  if (fresh) {
    p.responder->start_stream(200, "text/event-stream");
    if (p.chat)
      p.responder->write(render_chat_stream_role(id, self->state.options.model_name, p.created));
  }
  return it->second;
}

// Writes the text of the tokens so far, holding back a UTF-8 sequence that may still complete
// (all of it when `final`), so the pieces add up to exactly the whole completion's text.
void write_text(frontend_ptr self, uint64_t id, const http_bridge::pending& p, frontend_state::stream_text& st,
                bool final) {
  std::string piece;
  st.pending.erase(0, append_utf8(st.pending, final, piece));
  if (piece.empty() && !(final && !st.tokens.empty()))
    return;
  const auto& name = self->state.options.model_name;
  p.responder->write(p.chat ? render_chat_stream_chunk(id, piece, st.tokens, name, p.created)
                            : render_stream_chunk(id, piece, st.tokens, name, p.created));
  st.tokens.clear();
}

frontend_actor::behavior_type frontend(frontend_ptr self, scheduler_actor scheduler, std::shared_ptr<http_bridge> bridge,
                                       frontend_options options, trace_tap tap) {
  self->state.io = door("frontend", std::move(tap));
  self->state.scheduler = std::move(scheduler);
  self->state.bridge = std::move(bridge);
  self->state.options = std::move(options);
  return {
    [=](completion_request& request) {
      auto& io = self->state.io;
      io.received("http", request);
      io.send(self, self->state.scheduler, std::move(request));
    },
    [=](cancel_request& cancel) {
      auto& io = self->state.io;
      io.received("http", cancel);
      self->state.streams.erase(cancel.request_id);
      io.send(self, self->state.scheduler, cancel);
    },
    [=](evict_request& request) {
      auto& io = self->state.io;
      io.received("http", request);
      io.send(self, self->state.scheduler, std::move(request));
    },
    [=](const completion_chunk& chunk) {
      self->state.io.received(self->current_sender(), chunk);
      auto p = self->state.bridge->peek(chunk.request_id);
      if (!p.responder || !p.stream)
        return;
      auto& st = start_stream_once(self, chunk.request_id, p);
      st.pending += byte_tokenizer::decode_one(chunk.token_id);
      st.tokens.push_back(chunk.token_id);
      write_text(self, chunk.request_id, p, st, false);
    },
    [=](const completion_result& result) {
      self->state.io.received(self->current_sender(), result);
      auto p = self->state.bridge->take(result.request_id);
      if (!p.responder)
        return;
      const auto& name = self->state.options.model_name;
      if (p.stream) {
        auto& st = start_stream_once(self, result.request_id, p);
        write_text(self, result.request_id, p, st, true);
        self->state.streams.erase(result.request_id);
        p.responder->write(p.chat ? render_chat_stream_final(result, name, p.created)
                                  : render_stream_final(result, name, p.created));
        if (p.include_usage)
          p.responder->write(render_usage_chunk(result, p.chat, name, p.created));
        p.responder->write(render_stream_done());
        p.responder->end_stream();
      } else {
        const auto text = sanitize_utf8(byte_tokenizer::decode(result.token_ids));
        std::string body = p.chat ? render_chat_completion(result, text, name, p.created)
                                  : render_completion(result, text, name, p.created);
        if (p.remote_decode && self->state.options.kv_transfer_params) {
          auto j = nlohmann::json::parse(body);
          j["kv_transfer_params"] = self->state.options.kv_transfer_params(result, p.prompt_hash);
          body = j.dump();
        }
        p.responder->send(200, json_type, body);
      }
    },
    [=](const completion_failed& failed) {
      self->state.io.received(self->current_sender(), failed);
      auto p = self->state.bridge->take(failed.request_id);
      if (!p.responder)
        return;
      auto e = to_api_error(failed);
      if (p.stream && self->state.streams.erase(failed.request_id) > 0) {
        if (self->state.options.on_error)
          self->state.options.on_error(e.status);
        p.responder->write(render_stream_error(e));
        p.responder->write(render_stream_done());
        p.responder->end_stream();
      } else {
        send_error(*p.responder, e, self->state.options);
      }
    },
    [=](const evict_result& result) {
      self->state.io.received(self->current_sender(), result);
      auto p = self->state.bridge->take(result.request_id);
      if (!p.responder)
        return;
      // hbm: blocks (their checkpoints go with them); cpu: host-tier objects.
      nlohmann::json body = {{"tier", result.tier},
                             {result.tier == "hbm" ? "evicted_blocks" : "evicted_objects", result.num_blocks}};
      p.responder->send(200, json_type, body.dump());
    },
  };
}

} // namespace

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

frontend_actor spawn_frontend(caf::actor_system& sys, scheduler_actor scheduler, std::shared_ptr<http_bridge> bridge,
                              frontend_options options, trace_tap tap) {
  return sys.spawn(frontend, std::move(scheduler), std::move(bridge), std::move(options), std::move(tap));
}

http_server::handler make_http_handler(frontend_actor fe, std::shared_ptr<http_bridge> bridge, frontend_options opt,
                                       std::shared_ptr<std::atomic<bool>> draining,
                                       std::shared_ptr<parse_worker> parser) {
  return [fe, bridge, opt, draining, parser](http_request req, std::shared_ptr<http_responder> res) {
    auto fail = [&](int status, std::string message, const char* type) {
      send_error(*res, {status, std::move(message), type}, opt);
    };
    auto method_not_allowed = [&](const char* allowed) {
      fail(405, "method " + req.method + " is not allowed on " + req.path + "; use " + allowed,
           "invalid_request_error");
    };
    const bool api = req.path.compare(0, 4, "/v1/") == 0;
    const bool admin = req.path.compare(0, 7, "/admin/") == 0;
    if (api && !opt.api_key.empty() && !has_bearer(req, opt.api_key))
      return fail(401, "missing or wrong API key: send the header Authorization: Bearer <server.api_key>",
                  "authentication_error");
    if (admin && opt.admin_disabled)
      return fail(403,
                  "admin endpoints are off: the node listens beyond loopback and server.admin_key is not set; "
                  "set server.admin_key and send Authorization: Bearer <key>",
                  "permission_error");
    if (admin && !opt.admin_key.empty() && !has_bearer(req, opt.admin_key))
      return fail(401, "missing or wrong admin key: send the header Authorization: Bearer <server.admin_key>",
                  "authentication_error");

    if (req.path == "/health") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      nlohmann::json body = {{"status", draining->load() ? "draining" : "ok"}};
      if (opt.health_fields)
        body.update(opt.health_fields());
      return res->send(200, json_type, body.dump());
    }
    if (req.path == "/metrics") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      return res->send(200, "text/plain; version=0.0.4", opt.render_metrics ? opt.render_metrics() : "");
    }
    if (req.path == "/v1/models") {
      if (req.method != "GET")
        return method_not_allowed("GET");
      return res->send(200, json_type, render_models(opt.model_name, opt.created));
    }
    if (req.path == "/v1/completions" || req.path == "/v1/chat/completions") {
      if (req.method != "POST")
        return method_not_allowed("POST");
      if (draining->load())
        return fail(503, "the node is shutting down", "server_error");
      const bool chat = req.path == "/v1/chat/completions";
      parser->post([fe, bridge, opt, chat, body = std::move(req.body), res]() {
        auto parsed = chat ? parse_chat_completion_request(body, opt.limits)
                           : parse_completion_request(body, opt.limits);
        if (auto* e = std::get_if<api_error>(&parsed))
          return send_error(*res, *e, opt);
        auto& call = std::get<api_request>(parsed);
        if (call.kv_claim.names_peer() && opt.check_kv_peer)
          if (auto refused = opt.check_kv_peer(call))
            return send_error(*res, *refused, opt);
        const uint64_t id = bridge->next_id();
        call.request.request_id = id;
        bridge->put(id, {res, call.request.stream, unix_seconds(), call.chat, call.include_usage,
                         call.request.remote_decode,
                         call.request.remote_decode && opt.kv_transfer_params ? prompt_hash(call.request)
                                                                              : std::string()});
        caf::anon_send(fe, std::move(call.request));
        // After the request: the cancel can only reach the scheduler behind it.
        res->on_hangup([fe, bridge, id] {
          if (bridge->take(id).responder)
            caf::anon_send(fe, cancel_request{id});
        });
      });
      return;
    }
    if (req.path == "/admin/evict") {
      if (req.method != "POST")
        return method_not_allowed("POST");
      parser->post([fe, bridge, opt, body = std::move(req.body), res]() {
        auto parsed = parse_evict_request(body);
        if (auto* e = std::get_if<api_error>(&parsed))
          return send_error(*res, *e, opt);
        const std::string tier = std::get<std::string>(parsed);
        // The host tier has one name per node: "cpu" in process, "store" for a store server.
        if ((tier == "store" && opt.host_tier != "store") || (tier == "cpu" && opt.host_tier == "store"))
          return send_error(*res,
                            api_error{400,
                                      tier == "store"
                                          ? "tier \"store\": this node has no store server (kv_transfer.connector "
                                            "is not \"store\"); use \"hbm\" or \"cpu\""
                                          : "tier \"cpu\": this node's host tier is its store server; use "
                                            "{\"tier\": \"store\"} or \"hbm\"",
                                      "invalid_request_error"},
                            opt);
        evict_request request{bridge->next_id(), tier};
        bridge->put(request.request_id, {res, false, unix_seconds()});
        caf::anon_send(fe, std::move(request));
      });
      return;
    }
    fail(404,
         "no route for " + req.method + " " + req.path +
             "; try POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics, "
             "POST /admin/evict",
         "not_found_error");
  };
}

} // namespace ordo
