#include "actors/net/http_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace ordo {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr size_t max_head_bytes = 64u << 10;

std::string errno_text(int e) {
  if (e == ECONNREFUSED)
    return "connection refused";
  std::string s = std::strerror(e);
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

} // namespace

http_header_list parse_header_lines(const std::string& head) {
  http_header_list headers;
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

std::vector<std::string> parse_sse_data(const std::string& body) {
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
      std::string line =
          event.substr(line_start, line_end == std::string::npos ? std::string::npos : line_end - line_start);
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

http_client::http_client(int port, int timeout_s) : host_header_("127.0.0.1") {
  options_.timeout_s = timeout_s;
  connect_to("127.0.0.1", port);
}

http_client::http_client(const std::string& host, int port, http_client_options options)
    : options_(std::move(options)) {
  const bool v6 = host.find(':') != std::string::npos;
  host_header_ = (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  connect_to(host, port);
}

http_client::~http_client() { close(); }

void http_client::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

void http_client::shutdown_write() {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_WR);
}

bool http_client::fail(http_response& r, std::string why) {
  r.error = std::move(why);
  return false;
}

bool http_client::wait(short events, http_response& r) {
  const auto until = options_.whole_exchange ? deadline_ : clock_type::now() + std::chrono::seconds(options_.timeout_s);
  for (;;) {
    if (options_.cancelled && options_.cancelled())
      return fail(r, "cancelled");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()).count();
    if (left <= 0)
      return fail(r, "timed out after " + std::to_string(options_.timeout_s) + " s");
    pollfd p{fd_, events, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, options_.cancelled ? 200 : left)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(r, "poll: " + errno_text(errno));
    if (n > 0)
      return true;
  }
}

void http_client::connect_to(const std::string& host, int port) {
  deadline_ = clock_type::now() + std::chrono::seconds(options_.timeout_s);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    error_ = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return;
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    close();
    fd_ = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd_ < 0) {
      last = "socket: " + errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd_, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
      last = errno_text(errno);
      continue;
    }
    http_response r;
    if (!wait(POLLOUT, r)) {
      last = r.error;
      if (last == "cancelled")
        break;
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      last = errno_text(err);
      continue;
    }
    return;
  }
  close();
  error_ = last;
}

bool http_client::send_raw(const std::string& bytes) {
  http_response r;
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait(POLLOUT, r)) {
        error_ = r.error;
        return false;
      }
      continue;
    }
    error_ = "send: " + errno_text(errno);
    return false;
  }
  return fd_ >= 0;
}

bool http_client::send_request(const std::string& method, const std::string& path, const std::string& body,
                               const std::string& content_type, const http_header_list& headers) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: " + host_header_ + "\r\n";
  for (const auto& [name, value] : headers)
    req += name + ": " + value + "\r\n";
  if (!body.empty() || method == "POST")
    req += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  return send_raw(req);
}

bool http_client::fill(http_response& r) {
  if (fd_ < 0)
    return fail(r, error_.empty() ? "not connected" : error_);
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      buffer_.append(buf, static_cast<size_t>(n));
      return true;
    }
    if (n == 0 || errno == ECONNRESET) // a reset: the server closed with bytes of ours unread
      return fail(r, "connection closed");
    if (errno == EINTR)
      continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait(POLLIN, r))
        return false;
      continue;
    }
    return fail(r, "recv: " + errno_text(errno));
  }
}

http_response http_client::read_response(const std::function<bool(const std::string&)>& on_body_piece,
                                         const std::function<bool(const http_response& head)>& stream_if) {
  http_response r;
  for (;;) { // skip interim 1xx responses
    size_t head_end;
    while ((head_end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (buffer_.size() > max_head_bytes) {
        fail(r, "response headers over 64 KiB");
        return r;
      }
      if (!fill(r)) {
        if (r.error == "connection closed")
          r.error = "connection closed before a response";
        return r;
      }
    }
    std::string head = buffer_.substr(0, head_end);
    buffer_.erase(0, head_end + 4);
    r = http_response{};
    if (head.compare(0, 5, "HTTP/") != 0 || head.size() < 12) {
      fail(r, "bad status line: " + head.substr(0, 40));
      return r;
    }
    r.status = std::atoi(head.c_str() + 9);
    r.headers = parse_header_lines(head);
    if (r.status >= 200)
      break;
  }
  const bool streaming = stream_if && stream_if(r);
  bool stopped = false;
  auto deliver = [&](std::string piece) {
    if (piece.empty() || stopped)
      return !stopped;
    if (streaming)
      r.started = true;
    else
      r.body += piece;
    if (on_body_piece && !on_body_piece(piece)) {
      stopped = true;
      r.error = "stopped";
    }
    return !stopped;
  };
  auto incomplete = [&] {
    r.error = "incomplete body: " + r.error;
    return r;
  };

  if (r.header("transfer-encoding").find("chunked") != std::string::npos) {
    for (;;) {
      size_t line_end;
      while ((line_end = buffer_.find("\r\n")) == std::string::npos)
        if (!fill(r))
          return incomplete();
      size_t size = std::strtoul(buffer_.substr(0, line_end).c_str(), nullptr, 16);
      while (buffer_.size() < line_end + 2 + size + 2)
        if (!fill(r))
          return incomplete();
      std::string piece = buffer_.substr(line_end + 2, size);
      buffer_.erase(0, line_end + 2 + size + 2);
      if (size == 0 || !deliver(std::move(piece)))
        return r;
    }
  }
  if (std::string length = r.header("content-length"); !length.empty()) {
    size_t want = std::strtoul(length.c_str(), nullptr, 10);
    while (buffer_.size() < want) {
      if (streaming && !buffer_.empty()) { // pass on what came, as it comes
        want -= buffer_.size();
        if (!deliver(std::move(buffer_)))
          return r;
        buffer_.clear();
      }
      if (!fill(r))
        return incomplete();
    }
    std::string piece = buffer_.substr(0, want);
    buffer_.erase(0, want);
    deliver(std::move(piece));
    return r;
  }
  if (r.status == 204 || r.status == 304)
    return r;
  for (;;) { // no length: the body ends when the server closes
    if (streaming && !buffer_.empty()) {
      if (!deliver(std::move(buffer_)))
        return r;
      buffer_.clear();
    }
    if (!fill(r))
      break;
  }
  if (r.error != "connection closed")
    return incomplete();
  r.error.clear();
  deliver(std::move(buffer_));
  buffer_.clear();
  return r;
}

http_response http_client::request(const std::string& method, const std::string& path, const std::string& body) {
  if (!send_request(method, path, body)) {
    http_response r;
    r.error = error_;
    return r;
  }
  return read_response();
}

bool http_client::peer_closed() {
  http_response scratch;
  while (fill(scratch)) {
  }
  return scratch.error == "connection closed" && buffer_.empty();
}

http_response http_get(int port, const std::string& path) {
  http_client c(port);
  return c.request("GET", path);
}

http_response http_post(int port, const std::string& path, const std::string& body) {
  http_client c(port);
  return c.request("POST", path, body);
}

sse_response http_post_stream(int port, const std::string& path, const std::string& body) {
  http_client c(port);
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
