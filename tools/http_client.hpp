// A small blocking HTTP/1.1 client over loopback (used by `ordo demo` and the tests) (POSIX sockets, header-only).
// Errors never throw: a response with status 0 carries `error`. Reads time out (default 60 s).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ordo {

struct http_response {
  int status = 0;    // 0: no response (see error)
  std::string error; // why there is no (complete) response
  std::vector<std::pair<std::string, std::string>> headers; // names lowercased
  std::string body;  // chunked bodies are decoded

  std::string header(const std::string& name) const {
    for (const auto& [k, v] : headers)
      if (k == name)
        return v;
    return {};
  }
};

// The header fields of a response head (the lines after its status line): names lowercased,
// values without the whitespace around them.
inline std::vector<std::pair<std::string, std::string>> parse_header_lines(const std::string& head) {
  std::vector<std::pair<std::string, std::string>> headers;
  size_t pos = head.find("\r\n");
  while (pos != std::string::npos) {
    size_t next = head.find("\r\n", pos + 2);
    std::string line = head.substr(pos + 2, next == std::string::npos ? std::string::npos : next - pos - 2);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = line.find_first_not_of(" \t", colon + 1);
      std::string value = v == std::string::npos ? "" : line.substr(v);
      while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.pop_back();
      headers.emplace_back(std::move(name), std::move(value));
    }
    pos = next;
  }
  return headers;
}

// The `data:` payloads of an SSE body, in order ("[DONE]" included).
inline std::vector<std::string> parse_sse_data(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    std::string event = body.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? body.size() : end + 2;
    std::string data;
    bool has_data = false;
    size_t line_start = 0;
    while (line_start <= event.size()) {
      size_t line_end = event.find('\n', line_start);
      std::string line = event.substr(line_start, line_end == std::string::npos
                                                      ? std::string::npos
                                                      : line_end - line_start);
      if (line.rfind("data:", 0) == 0) {
        std::string value = line.substr(5);
        if (!value.empty() && value[0] == ' ')
          value.erase(0, 1);
        data += (has_data ? "\n" : "") + value;
        has_data = true;
      }
      if (line_end == std::string::npos)
        break;
      line_start = line_end + 1;
    }
    if (has_data)
      events.push_back(std::move(data));
  }
  return events;
}

// One client connection to 127.0.0.1:port; several requests may go over it (keep-alive).
class http_client_connection {
public:
  explicit http_client_connection(int port, int timeout_s = 60) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) {
      error_ = std::string("socket: ") + std::strerror(errno);
      return;
    }
    timeval tv{timeout_s, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) {
      error_ = std::string("connect: ") + std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~http_client_connection() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  http_client_connection(const http_client_connection&) = delete;
  http_client_connection& operator=(const http_client_connection&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Closes now (a test hanging up on the server); later calls fail.
  void close() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }
  const std::string& error() const { return error_; }

  bool send_raw(const std::string& bytes) {
    size_t sent = 0;
    while (fd_ >= 0 && sent < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        error_ = std::string("send: ") + std::strerror(errno);
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    return fd_ >= 0;
  }

  bool send_request(const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::string& content_type = "application/json") {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    if (!body.empty() || method == "POST")
      req += "Content-Type: " + content_type + "\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    return send_raw(req);
  }

  // Reads one response. `on_body_piece` sees each body piece as it arrives (decoded chunk or
  // raw bytes); returning false stops reading (the response then has error "stopped").
  http_response read_response(const std::function<bool(const std::string&)>& on_body_piece = {}) {
    http_response r;
    for (;;) { // skip interim 1xx responses
      size_t head_end;
      while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos)
        if (!fill(r))
          return r;
      std::string head = buffer_.substr(0, head_end);
      buffer_.erase(0, head_end + 4);
      r = http_response{};
      if (head.compare(0, 5, "HTTP/") != 0 || head.size() < 12) {
        r.error = "bad status line: " + head.substr(0, 40);
        return r;
      }
      r.status = std::atoi(head.c_str() + 9);
      r.headers = parse_header_lines(head);
      if (r.status >= 200)
        break;
    }
    auto deliver = [&](const std::string& piece) {
      r.body += piece;
      if (on_body_piece && !on_body_piece(piece)) {
        r.error = "stopped";
        return false;
      }
      return true;
    };
    std::string te = r.header("transfer-encoding");
    if (te.find("chunked") != std::string::npos) {
      for (;;) {
        size_t line_end;
        while ((line_end = buffer_.find("\r\n")) == std::string::npos)
          if (!fill(r))
            return incomplete(r);
        size_t size = std::strtoul(buffer_.substr(0, line_end).c_str(), nullptr, 16);
        while (buffer_.size() < line_end + 2 + size + 2)
          if (!fill(r))
            return incomplete(r);
        std::string piece = buffer_.substr(line_end + 2, size);
        buffer_.erase(0, line_end + 2 + size + 2);
        if (size == 0)
          return r;
        if (!deliver(piece))
          return r;
      }
    }
    std::string length = r.header("content-length");
    if (!length.empty()) {
      size_t want = std::strtoul(length.c_str(), nullptr, 10);
      while (buffer_.size() < want)
        if (!fill(r))
          return incomplete(r);
      std::string piece = buffer_.substr(0, want);
      buffer_.erase(0, want);
      deliver(piece);
      return r;
    }
    while (fill(r)) { // no length: the body ends when the server closes
    }
    r.error.clear();
    deliver(buffer_);
    buffer_.clear();
    return r;
  }

  http_response request(const std::string& method, const std::string& path,
                        const std::string& body = "") {
    if (!send_request(method, path, body)) {
      http_response r;
      r.error = error_;
      return r;
    }
    return read_response();
  }

  // Reads until the peer closes (or the timeout); true if it closed cleanly with no more data.
  bool peer_closed() {
    http_response scratch;
    while (fill(scratch)) {
    }
    return scratch.error == "connection closed" && buffer_.empty();
  }

private:
  bool fill(http_response& r) {
    if (fd_ < 0) {
      r.error = error_.empty() ? "not connected" : error_;
      return false;
    }
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n > 0) {
        buffer_.append(buf, static_cast<size_t>(n));
        return true;
      }
      if (n < 0 && errno == EINTR)
        continue;
      if (n == 0)
        r.error = "connection closed";
      else if (errno == EAGAIN || errno == EWOULDBLOCK)
        r.error = "timed out";
      else
        r.error = std::string("recv: ") + std::strerror(errno);
      return false;
    }
  }
  static http_response incomplete(http_response& r) {
    r.error = "incomplete body: " + r.error;
    return r;
  }

  int fd_ = -1;
  std::string error_;
  std::string buffer_;
};

inline http_response http_get(int port, const std::string& path) {
  http_client_connection c(port);
  return c.request("GET", path);
}

inline http_response http_post(int port, const std::string& path, const std::string& body) {
  http_client_connection c(port);
  return c.request("POST", path, body);
}

struct sse_response {
  int status = 0;
  std::string error;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;                // raw body (a JSON error when status is not 200)
  std::vector<std::string> events; // the `data:` payloads, "[DONE]" included
};

// POSTs a (streaming) request and collects the SSE `data:` payloads of the whole stream.
inline sse_response http_post_stream(int port, const std::string& path, const std::string& body) {
  http_client_connection c(port);
  http_response r = c.request("POST", path, body);
  sse_response s;
  s.status = r.status;
  s.error = r.error;
  s.headers = std::move(r.headers);
  s.body = std::move(r.body);
  s.events = parse_sse_data(s.body);
  return s;
}

} // namespace ordo
