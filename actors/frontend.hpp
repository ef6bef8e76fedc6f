// frontend: the bridge between the HTTP server thread (actors/net/http_server.hpp) and the actors.
//
// HTTP thread: routes, checks the bearer keys, and hands each request body to the parse worker.
// Parse worker (its own thread): parses and validates the body (runtime/completion_api.hpp),
// registers its responder in the bridge under a fresh request id, anon_sends the request to the
// frontend actor, and asks the responder to report a hang-up (→ cancel_request). Frontend actor:
// forwards requests and cancellations to the scheduler and renders the scheduler's answers onto
// the registered responders.
//   (per request) registered ──completion_chunk*──► streaming ──completion_result/failed──► answered
//        └──────────────── client hung up ──► cancel_request to the scheduler (answered by nobody)
// NOTE(stream): a streamed response starts (200, SSE) with its first chunk or result, so a request
// the scheduler refuses (429, 400) still gets its own status.
#pragma once

#include "runtime/tls.hpp" // is_loopback_host

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <condition_variable>
#include <deque>
#include <thread>

#include <caf/actor_system.hpp>
#include <nlohmann/json.hpp>

#include "actors/door.hpp"
#include "actors/net/http_server.hpp"
#include "actors/interfaces.hpp"
#include "runtime/completion_api.hpp"
#include "runtime/worker_pool.hpp"

namespace ordo {

// State shared by the HTTP thread and the frontend actor; every member is thread-safe.
class http_bridge {
public:
  struct pending {
    std::shared_ptr<http_responder> responder;
    bool stream = false;
    int64_t created = 0;
    bool chat = false;          // /v1/chat/completions: chat shapes
    bool include_usage = false; // stream_options.include_usage: a usage chunk before [DONE]
    bool remote_decode = false; // kv_transfer_params.do_remote_decode: answer with transfer params
    std::string prompt_hash = {}; // with remote_decode: what the answer's signed params cover
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

// Runs jobs in order on its own thread (request bodies are parsed here, not on the HTTP loop).
// The HTTP thread's parsing of request bodies runs on one worker thread.
using parse_worker = worker_pool;

struct frontend_options {
  std::string model_name;
  int64_t created = 0; // when the node started (GET /v1/models)
  api_limits limits;
  std::string api_key;         // "" = /v1/* needs no key
  std::string admin_key;       // "" = /admin/* needs no key (loopback only)
  bool admin_disabled = false; // bound beyond loopback without an admin key: /admin/* is 403
  // Prometheus text for GET /metrics; called on the HTTP thread.
  std::function<std::string()> render_metrics;
  // Members GET /health adds beside "status" (engine_id; the store link with connector "store").
  std::function<nlohmann::json()> health_fields;
  // The tier /admin/evict names for the host tier: "cpu" (offload), "store" (a store server), or
  // "" (none); the other name is refused.
  std::string host_tier;
  // P/D (connector "pd"): the kv_transfer_params a prefill answer carries (its result → object);
  // empty: answers carry none.
  // `prompt_hash` (runtime/pd_params.hpp) is the request's, for the signature.
  std::function<nlohmann::json(const completion_result& result, const std::string& prompt_hash)> kv_transfer_params;
  // P/D: whether a request's kv_transfer_params may name the prefill node they name (signed with
  // the deployment secret, or listed in pd.peers); an error refuses the request. Parse thread.
  std::function<std::optional<api_error>(const api_request& request)> check_kv_peer;
  // Counts requests answered with an error (by HTTP status), called on any thread.
  std::function<void(int status)> on_error;
};

frontend_actor spawn_frontend(caf::actor_system& sys, scheduler_actor scheduler, std::shared_ptr<http_bridge> bridge,
                              frontend_options options, trace_tap tap = {});

// The HTTP handler: routes /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics,
// /admin/evict. Runs on the HTTP thread; bodies are parsed on `parser`. `draining` makes new
// completions answer 503.
http_server::handler make_http_handler(frontend_actor frontend, std::shared_ptr<http_bridge> bridge,
                                       frontend_options options, std::shared_ptr<std::atomic<bool>> draining,
                                       std::shared_ptr<parse_worker> parser);

// Now, in seconds since the Unix epoch (OpenAI's `created`, the expiry of signed P/D parameters).
int64_t unix_seconds();


} // namespace ordo
