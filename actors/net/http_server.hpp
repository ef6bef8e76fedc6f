// A small HTTP/1.1 server on its own libuv loop thread (no CAF): keep-alive, Content-Length
// and chunked request bodies, complete or chunked (SSE) responses sent from any thread.
//
// Threads: the handler runs on the loop thread and must not block; http_responder methods may
// be called from any thread (they are marshalled onto the loop through a mutex-guarded queue
// and uv_async_send). start/stop_accepting/stop are called from the owner's thread, never from
// the handler. The loop thread blocks SIGPIPE: a write to a reset peer fails with EPIPE and
// closes that connection only.
//
// Per connection (loop thread), one request at a time; pipelined requests wait their turn:
//
//   idle ──first byte──► headers ──headers done──► body ──message done──► awaiting ──send───┐
//    ▲ idle_timeout:       │ header_timeout:         │ body_timeout:           │             │
//    │ close silently      └──► 408, close ◄─────────┘                start_stream           │
//    │                                                                         ▼             │
//    │                                                                     streaming         │
//    │                                                                         │ end_stream  │
//    └───── response complete: keep-alive (or FIN, drain input, close) ◄──────┴─────────────┘
//
// The server answers some requests itself, then closes: malformed ones (400: http_parser's
// errors, an upgrade, a header name that is not a token), a declared or running body over
// max_body_bytes (413), headers or a body too slow (408), and on a reserve connection anything
// but GET of cap_exempt_paths (503, Retry-After: 1). These and the 500 of a dropped responder go
// through one writer (bodies by write_error_body) and are reported to on_error.
//
// NOTE(timers): awaiting and streaming run no timer: the handler's time is not the client's.
// NOTE(hangup): peer EOF or reset, a write error, a timeout or stop() closes the connection in
// any state; in awaiting or streaming that is a hang-up and the responder's on_hangup callback
// runs. A client that half-closes (EOF) while awaiting counts as gone (nginx's 499 too): its
// EOF cannot be told from a client that gave up, and the request should stop costing work.
// NOTE(cap): up to max_connections normal connections, then num_reserve_connections reserve ones
// (only GET of cap_exempt_paths is served there, so /health answers under load); beyond those an
// accepted socket is closed at once.
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

// Timeouts are in milliseconds; 0 turns that timeout off.
struct http_server_options {
  std::string host = "127.0.0.1"; // an address, or a name bound at its first getaddrinfo address
  int port = 0;                   // 0: the OS picks
  size_t max_body_bytes = 8u << 20;   // larger bodies get 413 (a declared length at once)
  uint64_t header_timeout_ms = 10000; // first byte of a request until its headers are complete
  uint64_t body_timeout_ms = 30000;   // headers complete until the body is
  uint64_t idle_timeout_ms = 60000;   // accept or end of a response until the next first byte
  size_t max_connections = 1024;      // normal connections (reserve ones come on top)
  std::vector<std::string> cap_exempt_paths = {"/health", "/metrics"}; // GET, on reserve ones
  // Loop thread: each error response the server writes itself (400, 408, 413, 500, 503).
  std::function<void(int status)> on_error;
};

// The body of every error an HTTP edge writes (this server, `ordo store`, the proxy):
// {"error":{"message":..,"type":..,"code":null}}; `type` null: "server_error" for 5xx,
// "invalid_request_error" otherwise.
std::string write_error_body(int status, const std::string& message, const char* type = nullptr);

struct http_server_core;  // shared between the server and its responders (in http_server.cpp)
struct http_exchange;     // one request's state shared by its responder and its connection

// Answers one request. Thread-safe; calls after the response is complete are ignored.
class http_responder {
public:
  http_responder(std::shared_ptr<http_server_core> core, std::shared_ptr<http_exchange> exchange);
  ~http_responder();
  http_responder(const http_responder&) = delete;
  http_responder& operator=(const http_responder&) = delete;

  // A complete response with Content-Length; `headers` are added as given (a header whose name
  // or value holds CR or LF is dropped).
  void send(int status, std::string content_type, std::string body,
            std::vector<std::pair<std::string, std::string>> headers = {});
  // Starts a chunked response (e.g. text/event-stream); then write()… and end_stream().
  void start_stream(int status, std::string content_type);
  void write(std::string chunk);
  void end_stream();
  // True once the client went away (its chunks would be dropped).
  bool closed() const;
  // `f` runs once, on the loop thread, if the connection closes before this response is
  // complete (send, end_stream or drop); if it is already gone, `f` runs now on this thread.
  // It never runs once the response is complete. A later call replaces an earlier `f`.
  void on_hangup(std::function<void()> f);

private:
  std::shared_ptr<http_server_core> core_;
  std::shared_ptr<http_exchange> exchange_;
};

class http_server {
public:
  using handler = std::function<void(http_request, std::shared_ptr<http_responder>)>;
  static constexpr size_t num_reserve_connections = 16;

  http_server(http_server_options options, handler h);
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Resolves the host, binds, listens and starts the loop thread; returns the bound port.
  // Throws std::runtime_error naming the host (or address) and the cause (e.g. "address already
  // in use", or why the name did not resolve).
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
  http_server_options options_;
  handler handler_;
  std::shared_ptr<http_server_core> core_;
  std::unique_ptr<loop_state> loop_;
  std::thread thread_;
  std::mutex lifecycle_mutex_;
  bool started_ = false;
  bool stopped_ = false;
};

// True when `req` carries `Authorization: Bearer <key>`; compared in time independent of where
// the strings differ, so a key is not guessed byte by byte.
bool has_bearer(const http_request& req, const std::string& key);

} // namespace ordo
