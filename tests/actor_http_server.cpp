#include "actors/net/http_server.hpp"
#include "actors/net/http_client.hpp"

#include <catch.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <thread>

using namespace ordo;
using namespace std::chrono_literals;

namespace {

// Bounded poll: true once `pred` holds, false after `limit`.
template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit = 5000ms) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Holds the responders the handler parked, for tests that answer from another thread.
struct parked {
  std::mutex mutex;
  std::vector<std::pair<http_request, std::shared_ptr<http_responder>>> items;

  void add(http_request r, std::shared_ptr<http_responder> w) {
    std::lock_guard<std::mutex> g(mutex);
    items.emplace_back(std::move(r), std::move(w));
  }
  size_t size() {
    std::lock_guard<std::mutex> g(mutex);
    return items.size();
  }
  std::shared_ptr<http_responder> take(size_t i) {
    std::lock_guard<std::mutex> g(mutex);
    return std::move(items.at(i).second);
  }
  std::shared_ptr<http_responder> peek(size_t i) {
    std::lock_guard<std::mutex> g(mutex);
    return items.at(i).second;
  }
};

// Echo handler: "/echo" answers with what it got; "/park" parks; "/drop" drops; "/throw" throws.
http_server::handler test_handler(parked& park) {
  return [&park](http_request req, std::shared_ptr<http_responder> w) {
    if (req.path == "/echo") {
      w->send(200, "text/plain",
              req.method + " " + req.path + " ?" + req.query + " x-test=" + req.header("X-Test") +
                  " body=" + req.body);
    } else if (req.path == "/size") {
      w->send(200, "text/plain", std::to_string(req.body.size()));
    } else if (req.path == "/park") {
      park.add(std::move(req), std::move(w));
    } else if (req.path == "/drop") {
      // the responder goes out of scope unanswered
    } else if (req.path == "/throw") {
      throw std::runtime_error("handler failed");
    } else {
      w->send(404, "application/json", "{}");
    }
  };
}

// A raw loopback client socket, for what http_client hides: a reset (RST), a
// half-close, bytes paced one at a time, reads bounded by a deadline, and IPv6.
struct raw_socket {
  int fd = -1;
  bool peer_closed = false; // the server closed (EOF or reset)

  explicit raw_socket(int port, int family = AF_INET) {
    fd = ::socket(family, SOCK_STREAM, 0);
    sockaddr_storage addr{};
    socklen_t len;
    if (family == AF_INET6) {
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
      a6->sin6_family = AF_INET6;
      a6->sin6_port = htons(static_cast<uint16_t>(port));
      a6->sin6_addr = in6addr_loopback;
      len = sizeof *a6;
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      a4->sin_family = AF_INET;
      a4->sin_port = htons(static_cast<uint16_t>(port));
      a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a4;
    }
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) < 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~raw_socket() {
    if (fd >= 0)
      ::close(fd);
  }
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;

  bool send(const std::string& bytes) {
    return fd >= 0 && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                          static_cast<ssize_t>(bytes.size());
  }
  // Reads until `marker` is in what was read, the peer closes, or `limit` passes.
  std::string read_until(const std::string& marker, std::chrono::milliseconds limit = 5000ms) {
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (fd >= 0 && !peer_closed && (marker.empty() || got.find(marker) == std::string::npos)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        break;
      timeval tv{static_cast<time_t>(left.count() / 1000),
                 static_cast<suseconds_t>(left.count() % 1000 * 1000)};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[4096];
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        break;
      if (n <= 0) {
        peer_closed = true;
        break;
      }
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  // Everything until the server closes, or `limit` passes (then peer_closed stays false).
  std::string read_to_close(std::chrono::milliseconds limit = 5000ms) {
    return read_until("", limit);
  }
  // Closes with SO_LINGER {1, 0}: the kernel sends RST instead of FIN.
  void reset() {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
    fd = -1;
  }
  void shutdown_write() { ::shutdown(fd, SHUT_WR); }
};

// The statuses the server reported through on_error (loop thread), read from the test thread.
struct error_log {
  std::mutex mutex;
  std::vector<int> statuses;

  std::function<void(int)> hook() {
    return [this](int status) {
      std::lock_guard<std::mutex> g(mutex);
      statuses.push_back(status);
    };
  }
  std::vector<int> get() {
    std::lock_guard<std::mutex> g(mutex);
    return statuses;
  }
};

} // namespace

TEST_CASE("GET and POST round trip with path, query, headers and body") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();
  REQUIRE(port > 0);

  auto get = http_get(port, "/echo?a=1&b=2");
  CHECK(get.error.empty());
  CHECK(get.status == 200);
  CHECK(get.header("content-type") == "text/plain");
  CHECK(get.body == "GET /echo ?a=1&b=2 x-test= body=");

  http_client c(port);
  REQUIRE(c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nX-Test: yes\r\nContent-Length: 5\r\n\r\n"
                     "hello"));
  auto post = c.read_response();
  CHECK(post.status == 200);
  CHECK(post.body == "POST /echo ? x-test=yes body=hello");

  CHECK(http_get(port, "/nowhere").status == 404);
  CHECK(server.num_in_flight() == 0);
}

TEST_CASE("send adds the responder's headers; one with CR or LF is dropped") {
  http_server server({}, [](http_request, std::shared_ptr<http_responder> w) {
    w->send(429, "application/json", "{}",
            {{"Retry-After", "1"}, {"X-Evil", "a\r\nSet-Cookie: x=1"}, {"Bad\nName", "v"}});
  });
  int port = server.start();
  auto r = http_get(port, "/");
  CHECK(r.status == 429);
  CHECK(r.header("retry-after") == "1");
  CHECK(r.header("x-evil").empty());
  CHECK(r.header("set-cookie").empty());
  CHECK(r.body == "{}");
}

TEST_CASE("keep-alive: two requests on one connection, and pipelined requests in order") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();

  http_client c(port);
  auto first = c.request("POST", "/echo", "one");
  CHECK(first.status == 200);
  CHECK(first.header("connection") == "keep-alive");
  auto second = c.request("POST", "/echo", "two");
  CHECK(second.status == 200);
  CHECK(second.body == "POST /echo ? x-test= body=two");

  REQUIRE(c.send_raw("GET /echo?1 HTTP/1.1\r\n\r\nGET /echo?2 HTTP/1.1\r\n\r\n"));
  CHECK(c.read_response().body == "GET /echo ?1 x-test= body=");
  CHECK(c.read_response().body == "GET /echo ?2 x-test= body=");

  // "Connection: close" is honoured: the server answers, then closes.
  REQUIRE(c.send_raw("GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n"));
  auto last = c.read_response();
  CHECK(last.status == 200);
  CHECK(last.header("connection") == "close");
  CHECK(c.peer_closed());
}

TEST_CASE("a response sent later from another thread reaches the client") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();

  // No Catch assertions off the main thread (Catch is not thread-safe): record, check later.
  size_t in_flight_seen = 0;
  std::thread answer([&] {
    if (!wait_until([&] { return park.size() == 1; }))
      return;
    in_flight_seen = server.num_in_flight();
    std::this_thread::sleep_for(20ms);
    park.take(0)->send(201, "application/json", R"({"late":true})");
  });
  auto r = http_post(port, "/park", "{}");
  answer.join();
  CHECK(in_flight_seen == 1);
  CHECK(r.status == 201);
  CHECK(r.body == R"({"late":true})");
  CHECK(wait_until([&] { return server.num_in_flight() == 0; }));
}

TEST_CASE("SSE chunks written from another thread arrive as they are written") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();

  std::promise<void> first_seen;
  std::thread writer([&] {
    if (!wait_until([&] { return park.size() == 1; }))
      return;
    auto w = park.take(0);
    w->start_stream(200, "text/event-stream");
    w->write("data: one\n\n");
    // The second chunk is written only after the client saw the first: no buffering.
    first_seen.get_future().wait_for(10s);
    w->write("data: two\n\n");
    w->write("");
    w->write("data: [DONE]\n\n");
    w->end_stream();
    w->write("data: ignored\n\n"); // after the end: dropped
  });

  http_client c(port);
  REQUIRE(c.send_request("POST", "/park", R"({"stream":true})"));
  int pieces = 0;
  auto r = c.read_response([&](const std::string& piece) {
    if (++pieces == 1) {
      CHECK(piece == "data: one\n\n");
      first_seen.set_value();
    }
    return true;
  });
  writer.join();
  CHECK(r.error.empty());
  CHECK(r.status == 200);
  CHECK(r.header("content-type") == "text/event-stream");
  CHECK(r.header("transfer-encoding") == "chunked");
  CHECK(parse_sse_data(r.body) == std::vector<std::string>{"one", "two", "[DONE]"});
  // The connection stays usable after the stream.
  CHECK(c.request("GET", "/echo").status == 200);
}

TEST_CASE("malformed HTTP gets 400 and the connection closes") {
  parked park;
  error_log errors;
  http_server_options options;
  options.on_error = errors.hook();
  http_server server(options, test_handler(park));
  int port = server.start();

  http_client c(port);
  REQUIRE(c.send_raw("THIS IS NOT HTTP\r\n\r\n"));
  auto r = c.read_response();
  CHECK(r.status == 400);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.body == R"({"error":{"code":null,"message":"malformed HTTP request: invalid HTTP method",)"
                  R"("type":"invalid_request_error"}})");
  CHECK(r.header("connection") == "close");
  CHECK(c.peer_closed());

  http_client bad_length(port);
  REQUIRE(bad_length.send_raw("POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n"));
  CHECK(bad_length.read_response().status == 400);
  // The server keeps serving others.
  CHECK(http_get(port, "/echo").status == 200);
  CHECK(errors.get() == std::vector<int>{400, 400});
}

TEST_CASE("an upgrade or a header name with a space gets 400; requests before it are served") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();

  // "Content-Length : 3" is no Content-Length: passed on, "abc" would become a request.
  http_client smuggle(port, 5);
  REQUIRE(smuggle.send_raw("GET /echo?1 HTTP/1.1\r\n\r\n"
                           "POST /echo HTTP/1.1\r\nContent-Length : 3\r\n\r\nabc"));
  CHECK(smuggle.read_response().body == "GET /echo ?1 x-test= body=");
  auto refused = smuggle.read_response();
  CHECK(refused.status == 400);
  CHECK(refused.body.find("invalid character in a header name") != std::string::npos);
  CHECK(smuggle.peer_closed());

  http_client upgrade(port, 5);
  REQUIRE(upgrade.send_raw("GET /echo?1 HTTP/1.1\r\n\r\n"
                           "GET /echo?2 HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                           "Content-Length: 5\r\n\r\nhel"));
  CHECK(upgrade.read_response().body == "GET /echo ?1 x-test= body=");
  auto no_upgrade = upgrade.read_response();
  CHECK(no_upgrade.status == 400);
  CHECK(no_upgrade.body.find("protocol upgrade is not supported") != std::string::npos);
  CHECK(upgrade.peer_closed());
}

TEST_CASE("error bodies are OpenAI-shaped JSON with every control character escaped") {
  CHECK(write_error_body(400, "bad \"x\" \\ \n\t\x01\x1f end") ==
        R"({"error":{"code":null,"message":"bad \"x\" \\ \n\t\u0001\u001f end",)"
        R"("type":"invalid_request_error"}})");
  CHECK(write_error_body(503, "busy") ==
        R"({"error":{"code":null,"message":"busy","type":"server_error"}})");
}

TEST_CASE("bodies over 8 MiB (the default) get 413; exactly 8 MiB is accepted") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();
  const size_t limit = http_server_options{}.max_body_bytes;
  REQUIRE(limit == 8u << 20);

  auto ok = http_post(port, "/size", std::string(limit, 'a'));
  CHECK(ok.status == 200);
  CHECK(ok.body == std::to_string(limit));

  auto big = http_post(port, "/size", std::string(limit + 1, 'a'));
  CHECK(big.status == 413);
  CHECK(big.body.find("exceeds the limit") != std::string::npos);

  // A huge declared length is refused from the headers alone.
  http_client c(port);
  REQUIRE(c.send_raw("POST /size HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n"));
  CHECK(c.read_response().status == 413);

  // Chunked request bodies count too.
  http_client chunked(port);
  REQUIRE(chunked.send_raw(
      "POST /size HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
  CHECK(chunked.read_response().body == "3");
  std::string piece(1 << 20, 'b');
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", piece.size());
  REQUIRE(chunked.send_raw("POST /size HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  http_response too_big;
  for (int i = 0; i < 9; ++i)
    if (!chunked.send_raw(size_line + piece + "\r\n"))
      break;
  too_big = chunked.read_response();
  CHECK(too_big.status == 413);
}

TEST_CASE("max_body_bytes: a larger Content-Length is refused from the headers, unread") {
  parked park;
  error_log errors;
  http_server_options options;
  options.max_body_bytes = 1000;
  options.on_error = errors.hook();
  http_server server(options, test_handler(park));
  int port = server.start();

  CHECK(http_post(port, "/size", std::string(1000, 'a')).body == "1000");
  // Only the headers are sent: the 413 comes without the body (and long before body_timeout).
  http_client c(port, 3);
  REQUIRE(c.send_raw("POST /size HTTP/1.1\r\nContent-Length: 1001\r\n\r\n"));
  auto r = c.read_response();
  CHECK(r.status == 413);
  CHECK(r.body.find("exceeds the limit of 1000 bytes") != std::string::npos);
  CHECK(r.header("connection") == "close");
  CHECK(c.peer_closed());
  CHECK(errors.get() == std::vector<int>{413});
}

TEST_CASE("a dropped responder or a throwing handler answers 500") {
  parked park;
  error_log errors;
  http_server_options options;
  options.on_error = errors.hook();
  http_server server(options, test_handler(park));
  int port = server.start();

  http_client c(port);
  auto dropped = c.request("GET", "/drop");
  CHECK(dropped.status == 500);
  CHECK(dropped.body.find("without a response") != std::string::npos);
  CHECK(c.request("GET", "/throw").status == 500);
  CHECK(c.request("GET", "/echo").status == 200); // still keep-alive

  // A stream whose responder is dropped mid-way still ends.
  std::thread writer([&] {
    if (!wait_until([&] { return park.size() == 1; }))
      return;
    auto w = park.take(0);
    w->start_stream(200, "text/event-stream");
    w->write("data: partial\n\n");
  });
  auto s = http_post_stream(port, "/park", "{}");
  writer.join();
  CHECK(s.error.empty());
  CHECK(s.events == std::vector<std::string>{"partial"});
  CHECK(wait_until([&] { return server.num_in_flight() == 0; }));
  CHECK(errors.get() == std::vector<int>{500, 500}); // the ended stream is no error response
}

TEST_CASE("a client that goes away is seen by closed() and its late answer is harmless") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();
  {
    http_client c(port);
    REQUIRE(c.send_request("GET", "/park"));
    REQUIRE(wait_until([&] { return park.size() == 1; }));
  }
  auto w = park.take(0);
  CHECK(wait_until([&] { return w->closed(); }));
  CHECK(server.num_in_flight() == 0);
  w->send(200, "text/plain", "nobody listens");
  CHECK(http_get(port, "/echo").status == 200);
}

TEST_CASE("stop_accepting refuses new connections while in-flight responses complete") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();

  http_client inflight(port);
  REQUIRE(inflight.send_request("GET", "/park"));
  REQUIRE(wait_until([&] { return park.size() == 1; }));
  http_client idle(port);
  REQUIRE(idle.request("GET", "/echo").status == 200);

  server.stop_accepting();
  CHECK(server.num_in_flight() == 1);
  CHECK(idle.peer_closed()); // idle keep-alive connections are closed
  http_client late(port);
  CHECK_FALSE(late.connected());

  std::thread([&] { park.take(0)->send(200, "text/plain", "finished"); }).join();
  auto r = inflight.read_response();
  CHECK(r.status == 200);
  CHECK(r.body == "finished");
  CHECK(r.header("connection") == "close");
  CHECK(wait_until([&] { return server.num_in_flight() == 0; }));
  server.stop_accepting(); // twice is fine
}

TEST_CASE("stop closes everything, is idempotent, and late answers are harmless") {
  parked park;
  auto server = std::make_unique<http_server>(http_server_options{}, test_handler(park));
  int port = server->start();
  http_client c(port);
  REQUIRE(c.send_request("GET", "/park"));
  REQUIRE(wait_until([&] { return park.size() == 1; }));

  server->stop();
  server->stop();
  CHECK(c.peer_closed()); // the client does not hang
  auto w = park.take(0);
  CHECK(w->closed());
  w->send(200, "text/plain", "too late");
  server.reset(); // destructor after stop
  w.reset();      // responder outlives the server
  http_client after(port);
  CHECK_FALSE(after.connected());

  http_server never_started({}, test_handler(park));
  never_started.stop();
}

TEST_CASE("start fails with a clear message when the port is in use or the host is bad") {
  parked park;
  http_server first({}, test_handler(park));
  int port = first.start();
  http_server_options busy;
  busy.port = port;
  http_server second(busy, test_handler(park));
  try {
    second.start();
    FAIL("second server started on a busy port");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
    CHECK(what.find("address already in use") != std::string::npos);
  }
  http_server_options unknown;
  unknown.host = "no-such-host.invalid";
  http_server bad_host(unknown, test_handler(park));
  try {
    bad_host.start();
    FAIL("a server started on a host name that does not resolve");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.find("no-such-host.invalid") != std::string::npos);
    CHECK(what.find("resolve") != std::string::npos);
    CHECK(what.size() > std::string("cannot resolve the host \"no-such-host.invalid\": ").size());
  }
}

TEST_CASE("a host name is resolved to its first address") {
  parked park;
  http_server_options options;
  options.host = "localhost";
  http_server server(options, test_handler(park));
  int port = server.start();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  REQUIRE(::getaddrinfo("localhost", nullptr, &hints, &found) == 0);
  int family = found->ai_family;
  ::freeaddrinfo(found);
  raw_socket c(port, family);
  REQUIRE(c.send("GET /echo HTTP/1.1\r\nConnection: close\r\n\r\n"));
  CHECK(c.read_to_close().find("200 OK") != std::string::npos);
  CHECK(c.peer_closed);
}

TEST_CASE("writes to a stream whose client reset never raise SIGPIPE") {
  // The test process keeps the default SIGPIPE disposition: a SIGPIPE kills it.
  std::mutex mutex;
  std::shared_ptr<http_responder> stream;
  std::atomic<bool> loop_busy{false};
  http_server server({}, [&](http_request req, std::shared_ptr<http_responder> w) {
    if (req.path == "/stream") {
      w->start_stream(200, "text/event-stream");
      std::lock_guard<std::mutex> g(mutex);
      stream = std::move(w);
    } else if (req.path == "/busy") {
      loop_busy = true;
      std::this_thread::sleep_for(300ms); // blocks the loop thread on purpose
      w->send(200, "text/plain", "done");
    } else {
      w->send(200, "text/plain", "ok");
    }
  });
  int port = server.start();

  // A pipelines 16 requests behind its stream: the server stops reading A (its queue is full),
  // so nothing notices A's reset before the writes do.
  raw_socket a(port);
  std::string pipelined = "GET /stream HTTP/1.1\r\n\r\n";
  for (int i = 0; i < 16; ++i)
    pipelined += "GET /echo HTTP/1.1\r\n\r\n";
  REQUIRE(a.send(pipelined));
  REQUIRE(a.read_until("\r\n\r\n").find("200 OK") != std::string::npos);
  std::shared_ptr<http_responder> w;
  {
    std::lock_guard<std::mutex> g(mutex);
    w = stream;
  }
  REQUIRE(w);

  // While the loop is busy: write #1, then A resets, then writes #2..#4, so the loop handles
  // all four in one batch: #1 fails with ECONNRESET, libuv queues the rest and retries #2 on
  // the next turn, which fails with EPIPE and raises SIGPIPE unless the loop thread blocks it.
  http_client b(port);
  REQUIRE(b.send_request("GET", "/busy"));
  REQUIRE(wait_until([&] { return loop_busy.load(); }));
  w->write("data: 1\n\n");
  a.reset();
  std::this_thread::sleep_for(50ms);
  w->write("data: 2\n\n");
  w->write("data: 3\n\n");
  w->write("data: 4\n\n");

  auto busy = b.read_response();
  CHECK(busy.status == 200);
  CHECK(wait_until([&] { return w->closed(); }));
  CHECK(wait_until([&] { return server.num_in_flight() == 0; }));
  CHECK(http_get(port, "/echo").status == 200); // only that connection closed
}

TEST_CASE("an idle connection is closed silently at idle_timeout, before and after a request") {
  parked park;
  error_log errors;
  http_server_options options;
  options.idle_timeout_ms = 200;
  options.on_error = errors.hook();
  http_server server(options, test_handler(park));
  int port = server.start();

  auto start = std::chrono::steady_clock::now();
  raw_socket silent(port);
  CHECK(silent.read_to_close(3000ms).empty());
  CHECK(silent.peer_closed);
  CHECK(std::chrono::steady_clock::now() - start >= 150ms);

  raw_socket kept(port);
  REQUIRE(kept.send("GET /echo HTTP/1.1\r\n\r\n"));
  CHECK(kept.read_until("body=").find("200 OK") != std::string::npos);
  start = std::chrono::steady_clock::now();
  CHECK(kept.read_to_close(3000ms).empty());
  CHECK(kept.peer_closed);
  CHECK(std::chrono::steady_clock::now() - start >= 150ms);
  CHECK(errors.get().empty());
}

TEST_CASE("a slowloris is answered 408 at header_timeout however often it sends a byte") {
  parked park;
  error_log errors;
  http_server_options options;
  options.header_timeout_ms = 300;
  options.on_error = errors.hook();
  http_server server(options, test_handler(park));
  int port = server.start();

  // One byte every 50 ms: a timer reset by each byte would never fire.
  const std::string request = "GET /echo HTTP/1.1\r\nX-Padding: " + std::string(200, 'p');
  raw_socket slow(port);
  auto start = std::chrono::steady_clock::now();
  std::string got;
  for (size_t i = 0; i < request.size() && got.empty(); ++i) {
    if (!slow.send(request.substr(i, 1)))
      break;
    got = slow.read_until("}", 50ms);
  }
  got += slow.read_until("}", 2000ms);
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(got.find("HTTP/1.1 408 Request Timeout") != std::string::npos);
  CHECK(got.find("request headers not received within server.header_timeout_s = 0.3 s") !=
        std::string::npos);
  CHECK(got.find("Connection: close") != std::string::npos);
  CHECK(waited >= 250ms);
  CHECK(waited < 2000ms);
  CHECK(errors.get() == std::vector<int>{408});
}

TEST_CASE("a body that stalls is answered 408 at body_timeout") {
  parked park;
  http_server_options options;
  options.body_timeout_ms = 300;
  http_server server(options, test_handler(park));
  int port = server.start();

  http_client c(port, 5);
  REQUIRE(c.send_raw("POST /size HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"));
  auto start = std::chrono::steady_clock::now();
  auto r = c.read_response();
  CHECK(r.status == 408);
  CHECK(r.body.find("request body not received within server.body_timeout_s = 0.3 s") !=
        std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < 2000ms);
  CHECK(c.peer_closed());
}

TEST_CASE("no timer runs while a request awaits or streams its response") {
  parked park;
  http_server_options options;
  options.idle_timeout_ms = 100;
  options.header_timeout_ms = 100;
  options.body_timeout_ms = 100;
  http_server server(options, test_handler(park));
  int port = server.start();

  http_client awaiting(port, 5);
  REQUIRE(awaiting.send_request("GET", "/park"));
  // Half of a pipelined request behind it: its header timer must not start yet either.
  REQUIRE(awaiting.send_raw("GET /echo HTTP/1.1\r\n"));
  REQUIRE(wait_until([&] { return park.size() == 1; }));
  std::this_thread::sleep_for(400ms);
  std::thread([&] { park.take(0)->send(200, "text/plain", "late"); }).join();
  auto r = awaiting.read_response();
  CHECK(r.status == 200);
  CHECK(r.body == "late");
  // The pipelined request's header timer starts now, after the response.
  auto second = awaiting.read_response();
  CHECK(second.status == 408);

  http_client streaming(port, 5);
  REQUIRE(streaming.send_request("GET", "/park"));
  REQUIRE(wait_until([&] { return park.size() == 2; }));
  auto w = park.take(1);
  w->start_stream(200, "text/event-stream");
  w->write("data: one\n\n");
  std::thread writer([&] {
    std::this_thread::sleep_for(400ms);
    w->write("data: two\n\n");
    w->end_stream();
  });
  auto s = streaming.read_response();
  writer.join();
  CHECK(s.error.empty());
  CHECK(parse_sse_data(s.body) == std::vector<std::string>{"one", "two"});
}

TEST_CASE("at max_connections, reserve connections still serve /health and refuse the rest") {
  parked park;
  error_log errors;
  http_server_options options;
  options.max_connections = 4;
  options.on_error = errors.hook();
  http_server server(options, [&](http_request req, std::shared_ptr<http_responder> w) {
    if (req.path == "/health" || req.path == "/metrics")
      w->send(200, "application/json", R"({"status":"ok"})");
    else
      test_handler(park)(std::move(req), std::move(w));
  });
  int port = server.start();

  // Four normal connections, each proven accepted by a request, then held idle.
  std::vector<std::unique_ptr<http_client>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<http_client>(port, 5));
    REQUIRE(held.back()->request("POST", "/echo", "x").status == 200);
  }

  // Sixteen reserve connections serve GET of the exempt paths; one more is closed at once.
  std::vector<std::unique_ptr<http_client>> reserve;
  for (size_t i = 0; i < http_server::num_reserve_connections; ++i) {
    reserve.push_back(std::make_unique<http_client>(port, 5));
    auto health = reserve.back()->request("GET", "/health");
    REQUIRE(health.status == 200);
    CHECK(health.header("connection") == "keep-alive");
  }
  raw_socket beyond(port);
  beyond.send("GET /health HTTP/1.1\r\n\r\n");
  CHECK(beyond.read_to_close(3000ms).empty());
  CHECK(beyond.peer_closed);

  http_client& fifth = *reserve[0];
  CHECK(fifth.request("GET", "/metrics?name=x").status == 200);
  auto refused = fifth.request("POST", "/echo", "x");
  CHECK(refused.status == 503);
  CHECK(refused.header("retry-after") == "1");
  CHECK(refused.header("connection") == "close");
  CHECK(refused.body.find("connection limit of 4 reached; retry later") != std::string::npos);
  CHECK(fifth.peer_closed());
  // HEAD is not GET: refused too, from its headers.
  CHECK(reserve[1]->request("HEAD", "/health").status == 503);
  CHECK(errors.get() == std::vector<int>{503, 503});

  // A freed normal slot takes normal requests again.
  held.pop_back();
  reserve.pop_back();
  CHECK(wait_until([&] { return http_post(port, "/echo", "y").status == 200; }, 3000ms));
}

TEST_CASE("on_hangup runs once when the client of an awaiting request goes away") {
  parked park;
  http_server server({}, test_handler(park));
  int port = server.start();
  const auto test_thread = std::this_thread::get_id();

  std::atomic<int> hangups{0};
  std::atomic<bool> on_test_thread{true};
  {
    http_client c(port);
    REQUIRE(c.send_request("GET", "/park"));
    REQUIRE(wait_until([&] { return park.size() == 1; }));
    park.peek(0)->on_hangup([&] {
      on_test_thread = std::this_thread::get_id() == test_thread;
      hangups++;
    });
  }
  auto w = park.take(0);
  CHECK(wait_until([&] { return hangups == 1; }));
  CHECK_FALSE(on_test_thread); // the loop thread
  CHECK(w->closed());
  // Registered after the hang-up: runs at once, here.
  int late_runs = 0;
  w->on_hangup([&] { late_runs++; });
  CHECK(late_runs == 1);
  w->send(200, "text/plain", "nobody listens");
  CHECK(hangups == 1);

  // A half-close (EOF) while awaiting counts as gone too.
  raw_socket half(port);
  REQUIRE(half.send("GET /park HTTP/1.1\r\n\r\n"));
  REQUIRE(wait_until([&] { return park.size() == 2; }));
  std::atomic<int> half_hangups{0};
  park.peek(1)->on_hangup([&] { half_hangups++; });
  half.shutdown_write();
  CHECK(wait_until([&] { return half_hangups == 1; }));
  CHECK(wait_until([&] { return server.num_in_flight() == 0; }));
}

TEST_CASE("on_hangup runs when a streaming client resets, and on stop, but never after the end") {
  parked park;
  auto server = std::make_unique<http_server>(http_server_options{}, test_handler(park));
  int port = server->start();

  std::atomic<int> stream_hangups{0};
  raw_socket streaming(port);
  REQUIRE(streaming.send("GET /park HTTP/1.1\r\n\r\n"));
  REQUIRE(wait_until([&] { return park.size() == 1; }));
  auto w = park.take(0);
  w->on_hangup([&] { stream_hangups++; });
  w->start_stream(200, "text/event-stream");
  w->write("data: one\n\n");
  REQUIRE(streaming.read_until("data: one").find("200 OK") != std::string::npos);
  streaming.reset();
  CHECK(wait_until([&] { return stream_hangups == 1; }));
  w->write("data: dropped\n\n");
  w->end_stream();
  CHECK(stream_hangups == 1);

  // Completed responses never hang up, even when their connection closes later.
  std::atomic<int> completed_hangups{0};
  std::shared_ptr<http_responder> answered;
  {
    http_client c(port);
    REQUIRE(c.send_request("GET", "/park"));
    REQUIRE(wait_until([&] { return park.size() == 2; }));
    answered = park.take(1);
    answered->on_hangup([&] { completed_hangups++; });
    answered->send(200, "text/plain", "done");
    CHECK(c.read_response().status == 200);
  } // the client closes
  CHECK(wait_until([&] { return answered->closed(); }));
  CHECK(completed_hangups == 0);

  // stop() hangs up what is still in flight before it returns.
  std::atomic<int> stop_hangups{0};
  http_client pending(port);
  REQUIRE(pending.send_request("GET", "/park"));
  REQUIRE(wait_until([&] { return park.size() == 3; }));
  auto in_flight = park.take(2);
  in_flight->on_hangup([&] { stop_hangups++; });
  server->stop();
  CHECK(stop_hangups == 1);
  CHECK(in_flight->closed());
}
