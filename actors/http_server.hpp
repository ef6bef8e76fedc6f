// A small HTTP/1.1 server on its own libuv loop thread (no CAF): keep-alive, Content-Length
// and chunked request bodies, complete or chunked (SSE) responses sent from any thread.
//
// Threads: the handler runs on the loop thread and must not block; http_responder methods may
// be called from any thread (they are marshalled onto the loop through a mutex-guarded queue
// and uv_async_send). start/stop_accepting/stop are called from the owner's thread, never from
// the handler.
//
// Per connection, one request is served at a time (pipelined requests wait their turn):
//   idle ──request──► awaiting ──send──────────────────────────► idle (or closed)
//                        └──start_stream──► streaming ──end_stream──┘
// NOTE(http): a responder dropped while awaiting answers 500; dropped while streaming ends the
// stream, so a client never hangs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ordo {

struct http_request {
  std::string method; // "GET", "POST", ...
  std::string path;   // "/v1/completions" (no query)
  std::string query;  // the part after '?', "" if none
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers; // names lowercased

  // The first header named `name` (case-insensitive), "" if absent.
  std::string header(const std::string& name) const;
};

struct http_server_core; // shared between the server and its responders (in http_server.cpp)

// Answers one request. Thread-safe; calls after the response is complete are ignored.
class http_responder {
public:
  http_responder(std::shared_ptr<http_server_core> core, uint64_t connection_id, uint64_t seq,
                 std::shared_ptr<std::atomic<bool>> closed);
  ~http_responder();
  http_responder(const http_responder&) = delete;
  http_responder& operator=(const http_responder&) = delete;

  // A complete response with Content-Length.
  void send(int status, std::string content_type, std::string body);
  // Starts a chunked response (e.g. text/event-stream); then write()… and end_stream().
  void start_stream(int status, std::string content_type);
  void write(std::string chunk);
  void end_stream();
  // True once the client went away (its chunks would be dropped).
  bool closed() const;

private:
  enum class phase { awaiting, streaming, done };
  std::shared_ptr<http_server_core> core_;
  uint64_t connection_id_;
  uint64_t seq_;
  std::shared_ptr<std::atomic<bool>> closed_;
  mutable std::mutex mutex_;
  phase phase_ = phase::awaiting;
};

class http_server {
public:
  using handler = std::function<void(http_request, std::shared_ptr<http_responder>)>;
  static constexpr size_t max_body_bytes = 8u << 20; // larger bodies get 413

  http_server(std::string host, int port, handler h); // port 0: the OS picks
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Binds, listens and starts the loop thread; returns the bound port. Throws
  // std::runtime_error naming the address and the cause (e.g. "address already in use").
  int start();
  // Closes the listener and idle connections; in-flight responses still complete, then their
  // connections close. Returns once the listener is closed.
  void stop_accepting();
  // Requests handed to the handler whose response is not complete yet.
  size_t num_in_flight() const;
  // Closes every connection and joins the loop thread. Idempotent.
  void stop();

  struct loop_state; // loop-thread state (in http_server.cpp)

private:
  std::string host_;
  int port_;
  handler handler_;
  std::shared_ptr<http_server_core> core_;
  std::unique_ptr<loop_state> loop_;
  std::thread thread_;
  std::mutex lifecycle_mutex_;
  bool started_ = false;
  bool stopped_ = false;
};

} // namespace ordo
