#include "actors/http_server.hpp"
#include "tools/http_client.hpp"

#include <catch.hpp>

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

} // namespace

TEST_CASE("GET and POST round trip with path, query, headers and body") {
  parked park;
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();
  REQUIRE(port > 0);

  auto get = http_get(port, "/echo?a=1&b=2");
  CHECK(get.error.empty());
  CHECK(get.status == 200);
  CHECK(get.header("content-type") == "text/plain");
  CHECK(get.body == "GET /echo ?a=1&b=2 x-test= body=");

  http_client_connection c(port);
  REQUIRE(c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nX-Test: yes\r\nContent-Length: 5\r\n\r\n"
                     "hello"));
  auto post = c.read_response();
  CHECK(post.status == 200);
  CHECK(post.body == "POST /echo ? x-test=yes body=hello");

  CHECK(http_get(port, "/nowhere").status == 404);
  CHECK(server.num_in_flight() == 0);
}

TEST_CASE("keep-alive: two requests on one connection, and pipelined requests in order") {
  parked park;
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();

  http_client_connection c(port);
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
  http_server server("127.0.0.1", 0, test_handler(park));
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
  http_server server("127.0.0.1", 0, test_handler(park));
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

  http_client_connection c(port);
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
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();

  http_client_connection c(port);
  REQUIRE(c.send_raw("THIS IS NOT HTTP\r\n\r\n"));
  auto r = c.read_response();
  CHECK(r.status == 400);
  CHECK(r.body.find("malformed HTTP request") != std::string::npos);
  CHECK(r.header("connection") == "close");
  CHECK(c.peer_closed());

  http_client_connection bad_length(port);
  REQUIRE(bad_length.send_raw("POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n"));
  CHECK(bad_length.read_response().status == 400);
  // The server keeps serving others.
  CHECK(http_get(port, "/echo").status == 200);
}

TEST_CASE("bodies over 8 MiB get 413; exactly 8 MiB is accepted") {
  parked park;
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();

  auto ok = http_post(port, "/size", std::string(http_server::max_body_bytes, 'a'));
  CHECK(ok.status == 200);
  CHECK(ok.body == std::to_string(http_server::max_body_bytes));

  auto big = http_post(port, "/size", std::string(http_server::max_body_bytes + 1, 'a'));
  CHECK(big.status == 413);
  CHECK(big.body.find("exceeds the limit") != std::string::npos);

  // A huge declared length is refused from the headers alone.
  http_client_connection c(port);
  REQUIRE(c.send_raw("POST /size HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n"));
  CHECK(c.read_response().status == 413);

  // Chunked request bodies count too.
  http_client_connection chunked(port);
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

TEST_CASE("a dropped responder or a throwing handler answers 500") {
  parked park;
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();

  http_client_connection c(port);
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
}

TEST_CASE("a client that goes away is seen by closed() and its late answer is harmless") {
  parked park;
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();
  {
    http_client_connection c(port);
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
  http_server server("127.0.0.1", 0, test_handler(park));
  int port = server.start();

  http_client_connection inflight(port);
  REQUIRE(inflight.send_request("GET", "/park"));
  REQUIRE(wait_until([&] { return park.size() == 1; }));
  http_client_connection idle(port);
  REQUIRE(idle.request("GET", "/echo").status == 200);

  server.stop_accepting();
  CHECK(server.num_in_flight() == 1);
  CHECK(idle.peer_closed()); // idle keep-alive connections are closed
  http_client_connection late(port);
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
  auto server = std::make_unique<http_server>("127.0.0.1", 0, test_handler(park));
  int port = server->start();
  http_client_connection c(port);
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
  http_client_connection after(port);
  CHECK_FALSE(after.connected());

  http_server never_started("127.0.0.1", 0, test_handler(park));
  never_started.stop();
}

TEST_CASE("start fails with a clear message when the port is in use or the host is bad") {
  parked park;
  http_server first("127.0.0.1", 0, test_handler(park));
  int port = first.start();
  http_server second("127.0.0.1", port, test_handler(park));
  try {
    second.start();
    FAIL("second server started on a busy port");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
    CHECK(what.find("address already in use") != std::string::npos);
  }
  http_server bad_host("not-an-ip", 0, test_handler(park));
  CHECK_THROWS_WITH(bad_host.start(), Catch::Contains("not-an-ip"));
}
