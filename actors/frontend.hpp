// frontend: the bridge between the HTTP server thread (actors/http_server.hpp) and the actors.
//
// HTTP thread: parses and validates a request (runtime/completion_api.hpp), registers its
// responder in the bridge under a fresh request id, and anon_sends the request to the frontend
// actor. Frontend actor: forwards requests to the scheduler and renders the scheduler's answers
// onto the registered responders.
//   (per request) registered ──completion_chunk*──► streaming ──completion_result/failed──► answered
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/http_server.hpp"
#include "actors/interfaces.hpp"
#include "runtime/completion_api.hpp"

namespace ordo {

// State shared by the HTTP thread and the frontend actor; every member is thread-safe.
class http_bridge {
public:
  struct pending {
    std::shared_ptr<http_responder> responder;
    bool stream = false;
    int64_t created = 0;
  };

  uint64_t next_id() { return ++last_id_; }
  void put(uint64_t id, pending p);
  // Removes and returns the entry (empty responder if none).
  pending take(uint64_t id);
  // The entry's responder without removing it (streaming chunks).
  pending peek(uint64_t id);
  size_t size() const;

private:
  std::atomic<uint64_t> last_id_{0};
  mutable std::mutex mutex_;
  std::map<uint64_t, pending> entries_;
};

struct frontend_options {
  std::string model_name;
  api_limits limits;
  // Prometheus text for GET /metrics; called on the HTTP thread.
  std::function<std::string()> render_metrics;
  // Counts requests answered with an error (by HTTP status), called on any thread.
  std::function<void(int status)> on_error;
};

frontend_actor spawn_frontend(caf::actor_system& sys, scheduler_actor scheduler, std::shared_ptr<http_bridge> bridge,
                              frontend_options options);

// The HTTP handler: routes /v1/completions, /health, /metrics, /admin/evict. Runs on the HTTP
// thread. `draining` makes new completions answer 503.
http_server::handler make_http_handler(frontend_actor frontend, std::shared_ptr<http_bridge> bridge,
                                       frontend_options options, std::shared_ptr<std::atomic<bool>> draining);

} // namespace ordo
