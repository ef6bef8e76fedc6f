// The one blocking HTTP/1.1 client (POSIX sockets): the proxy's upstream calls, `ordo demo`, the
// topology runner, `ordo bench pd` and the tests. Runs on the caller's thread. Errors never throw:
// a response with status 0 carries `error`.
//
// Every wait (connect, a send, a read) is bounded by `timeout_s`, or, with `whole_exchange`, the
// whole exchange is (the proxy's deadline per upstream call); `cancelled` is polled every 200 ms
// while waiting. Error texts: "connection refused" (and the other connect errnos, lowercased),
// "timed out after N s", "cancelled", "connection closed" (EOF or reset), "connection closed
// before a response", "incomplete body: …", "bad status line: …", "stopped".
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ordo {

using http_header_list = std::vector<std::pair<std::string, std::string>>;

struct http_response {
  int status = 0;    // 0: no response (see error); with a body cut short, the status and an error
  std::string error; // why there is no (complete) response
  http_header_list headers; // names lowercased
  std::string body;  // chunked bodies are decoded; empty when streamed (read_response's stream_if)
  bool started = false; // a streamed body: at least one piece went to on_body_piece

  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (k == name)
        return v;
    return {};
  }
};

// The header fields of a response head (the lines after its status line): names lowercased,
// values without the whitespace around them.
http_header_list parse_header_lines(const std::string& head);

// The `data:` payloads of an SSE body, in order ("[DONE]" included).
std::vector<std::string> parse_sse_data(const std::string& body);

struct http_client_options {
  int timeout_s = 60;          // each wait; with whole_exchange, the whole exchange from the start
  bool whole_exchange = false;
  std::function<bool()> cancelled; // true aborts the exchange ("cancelled")
};

// One client connection; several requests may go over it (keep-alive).
class http_client {
public:
  // To 127.0.0.1:port.
  explicit http_client(int port, int timeout_s = 60);
  // To host:port: an address or a name (each getaddrinfo address in turn until one connects).
  http_client(const std::string& host, int port, http_client_options options);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Closes now (a test hanging up on the server); later calls fail.
  void close();
  // Half-closes: the server sees this client's EOF and may still answer.
  void shutdown_write();
  const std::string& error() const { return error_; }

  bool send_raw(const std::string& bytes);
  // Content-Type and Content-Length are sent with a body or a POST; `headers` go as given.
  bool send_request(const std::string& method, const std::string& path, const std::string& body = "",
                    const std::string& content_type = "application/json", const http_header_list& headers = {});

  // Reads one response (interim 1xx skipped). `on_body_piece` sees each body piece as it arrives
  // (decoded chunk, or raw bytes); returning false stops reading (error "stopped"). `stream_if`,
  // called once the head is read: true routes the body to on_body_piece only (body stays empty),
  // passing bytes on as they arrive.
  http_response read_response(const std::function<bool(const std::string&)>& on_body_piece = {},
                              const std::function<bool(const http_response& head)>& stream_if = {});

  http_response request(const std::string& method, const std::string& path, const std::string& body = "");

  // Reads until the peer closes (or the timeout); true if it closed with no more data.
  bool peer_closed();

private:
  bool fail(http_response& r, std::string why);
  bool wait(short events, http_response& r); // false: timed out, cancelled or poll failed
  bool fill(http_response& r);               // appends what arrives to buffer_
  void connect_to(const std::string& host, int port);

  int fd_ = -1;
  std::string error_;
  std::string buffer_;
  std::string host_header_;
  http_client_options options_;
  std::chrono::steady_clock::time_point deadline_; // whole_exchange only
};

http_response http_get(int port, const std::string& path);
http_response http_post(int port, const std::string& path, const std::string& body);

struct sse_response {
  int status = 0;
  std::string error;
  http_header_list headers;
  std::string body;                // raw body (a JSON error when status is not 200)
  std::vector<std::string> events; // the `data:` payloads, "[DONE]" included
};

// POSTs a (streaming) request and collects the SSE `data:` payloads of the whole stream.
sse_response http_post_stream(int port, const std::string& path, const std::string& body);

} // namespace ordo
