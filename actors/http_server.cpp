#include "actors/http_server.hpp"

#include <http_parser.h>
#include <uv.h>

#include <cstdio>
#include <cctype>
#include <deque>
#include <future>
#include <stdexcept>
#include <unordered_map>

namespace ordo {

// --- cross-thread op queue ----------------------------------------------------------------------

namespace {

struct http_op {
  enum kind_t { send, start_stream, write, end_stream, dropped, stop_accepting, stop } kind;
  uint64_t connection_id = 0;
  uint64_t seq = 0;
  int status = 0;
  std::string content_type;
  std::string data;
  std::promise<void>* done = nullptr;
};

http_op make_op(http_op::kind_t kind, uint64_t connection_id = 0, uint64_t seq = 0,
                int status = 0, std::string content_type = {}, std::string data = {}) {
  http_op op;
  op.kind = kind;
  op.connection_id = connection_id;
  op.seq = seq;
  op.status = status;
  op.content_type = std::move(content_type);
  op.data = std::move(data);
  return op;
}

} // namespace

struct http_server_core {
  std::mutex mutex;
  bool open = false;         // the async handle is valid and ops are accepted
  uv_async_t* async = nullptr;
  std::vector<http_op> ops;
  std::atomic<size_t> num_in_flight{0};

  // Any thread. Returns false once the loop has stopped taking ops.
  bool post(http_op op) {
    std::lock_guard<std::mutex> guard(mutex);
    if (!open)
      return false;
    ops.push_back(std::move(op));
    uv_async_send(async);
    return true;
  }
};

// --- http_request ------------------------------------------------------------------------------

namespace {

std::string lowercase(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

} // namespace

std::string http_request::header(const std::string& name) const {
  std::string key = lowercase(name);
  for (const auto& [k, v] : headers)
    if (k == key)
      return v;
  return {};
}

// --- http_responder ----------------------------------------------------------------------------

http_responder::http_responder(std::shared_ptr<http_server_core> core, uint64_t connection_id,
                               uint64_t seq, std::shared_ptr<std::atomic<bool>> closed)
    : core_(std::move(core)), connection_id_(connection_id), seq_(seq),
      closed_(std::move(closed)) {}

http_responder::~http_responder() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (phase_ != phase::done)
    core_->post(make_op(http_op::dropped, connection_id_, seq_));
}

void http_responder::send(int status, std::string content_type, std::string body) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (phase_ != phase::awaiting)
    return;
  phase_ = phase::done;
  core_->post(make_op(http_op::send, connection_id_, seq_, status, std::move(content_type),
                      std::move(body)));
}

void http_responder::start_stream(int status, std::string content_type) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (phase_ != phase::awaiting)
    return;
  phase_ = phase::streaming;
  core_->post(
      make_op(http_op::start_stream, connection_id_, seq_, status, std::move(content_type)));
}

void http_responder::write(std::string chunk) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (phase_ != phase::streaming || chunk.empty())
    return;
  core_->post(make_op(http_op::write, connection_id_, seq_, 0, {}, std::move(chunk)));
}

void http_responder::end_stream() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (phase_ != phase::streaming)
    return;
  phase_ = phase::done;
  core_->post(make_op(http_op::end_stream, connection_id_, seq_));
}

bool http_responder::closed() const { return closed_->load(); }

// --- loop-thread state -------------------------------------------------------------------------

namespace {

struct connection;

// A request parsed off the wire, or an error the server answers itself before closing.
struct pending_item {
  int error_status = 0;
  std::string error_message;
  http_request request;
  bool keep_alive = true;
};

enum class conn_state { idle, awaiting, streaming };

} // namespace

struct http_server::loop_state {
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t async;
  bool listener_open = false;
  bool draining = false;
  bool stopping = false;
  uint64_t next_connection_id = 1;
  uint64_t next_seq = 1;
  std::unordered_map<uint64_t, connection*> connections;
  std::shared_ptr<http_server_core> core;
  http_server::handler handler;
  http_parser_settings settings;
};

namespace {

using loop_state = http_server::loop_state;

constexpr size_t max_pending_per_connection = 16; // pipelined requests before reading pauses
constexpr uint64_t linger_ms = 2000;              // after our FIN, wait this long for the peer's

struct connection {
  uv_tcp_t tcp;
  uv_timer_t linger;
  loop_state* loop = nullptr;
  uint64_t id = 0;
  http_parser parser;
  http_request building;
  bool last_was_value = false;
  size_t body_bytes = 0;
  int fail_status = 0; // set by a parser callback that rejects the request
  std::string fail_message;
  bool parse_failed = false; // input after a parse error is discarded
  std::deque<pending_item> pending;
  conn_state state = conn_state::idle;
  uint64_t seq = 0;
  bool keep_alive = true;
  std::shared_ptr<std::atomic<bool>> closed_flag = std::make_shared<std::atomic<bool>>(false);
  bool reading = false;
  bool shutting_down = false;
  bool closing = false;
  int handles_open = 2;
  char buf[64 * 1024];
};

struct write_req {
  uv_write_t req;
  std::string data;
  connection* conn;
};

const char* reason_phrase(int status) {
  switch (status) {
  case 100: return "Continue";
  case 200: return "OK";
  case 201: return "Created";
  case 202: return "Accepted";
  case 204: return "No Content";
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 408: return "Request Timeout";
  case 409: return "Conflict";
  case 413: return "Payload Too Large";
  case 422: return "Unprocessable Entity";
  case 429: return "Too Many Requests";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  default: return "Unknown";
  }
}

std::string error_json(const std::string& message, const char* type) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\')
      escaped.push_back('\\');
    escaped.push_back(c);
  }
  return std::string("{\"error\":{\"message\":\"") + escaped + "\",\"type\":\"" + type +
         "\",\"code\":null}}";
}

void close_connection(connection* c);
void dispatch_next(connection* c);

void on_handle_closed(uv_handle_t* h) {
  auto* c = static_cast<connection*>(h->data);
  if (--c->handles_open == 0)
    delete c;
}

// Hard close: both handles; pending writes are cancelled. Frees `c` once libuv is done.
void close_connection(connection* c) {
  if (c->closing)
    return;
  c->closing = true;
  if (c->state != conn_state::idle) {
    c->loop->core->num_in_flight--;
    c->state = conn_state::idle;
  }
  c->closed_flag->store(true);
  c->loop->connections.erase(c->id);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->linger), on_handle_closed);
}

void on_written(uv_write_t* req, int status) {
  auto* w = reinterpret_cast<write_req*>(req);
  if (status < 0 && !w->conn->closing)
    close_connection(w->conn);
  delete w;
}

void write_raw(connection* c, std::string data) {
  if (c->closing || data.empty())
    return;
  auto* w = new write_req{};
  w->data = std::move(data);
  w->conn = c;
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  int rc = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1, on_written);
  if (rc < 0) {
    delete w;
    close_connection(c);
  }
}

void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* c = static_cast<connection*>(h->data);
  *buf = uv_buf_init(c->buf, sizeof c->buf);
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

void start_reading(connection* c) {
  if (c->reading || c->closing)
    return;
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), on_alloc, on_read) == 0)
    c->reading = true;
}

void on_linger_expired(uv_timer_t* t) { close_connection(static_cast<connection*>(t->data)); }

void on_shutdown(uv_shutdown_t* req, int status) {
  auto* c = static_cast<connection*>(req->data);
  delete req;
  if (c->closing)
    return;
  if (status < 0) {
    close_connection(c);
    return;
  }
  uv_timer_start(&c->linger, on_linger_expired, linger_ms, 0);
}

// Graceful close after the last response: FIN once the writes are flushed, then discard input
// until the peer closes (closing with unread input would reset the connection and could destroy
// the response before the client reads it).
void begin_shutdown(connection* c) {
  if (c->shutting_down || c->closing)
    return;
  c->shutting_down = true;
  c->pending.clear();
  start_reading(c);
  auto* req = new uv_shutdown_t{};
  req->data = c;
  if (uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), on_shutdown) < 0) {
    delete req;
    close_connection(c);
  }
}

std::string response_head(connection* c, int status, const std::string& content_type,
                          const std::string& length_header) {
  bool close = !c->keep_alive || c->loop->draining;
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty())
    head += "Content-Type: " + content_type + "\r\n";
  head += length_header;
  head += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  return head;
}

void write_complete_response(connection* c, int status, const std::string& content_type,
                             const std::string& body) {
  std::string data = response_head(c, status, content_type,
                                   "Content-Length: " + std::to_string(body.size()) + "\r\n");
  data += body;
  write_raw(c, std::move(data));
}

// Counted before the last bytes are written: a client that has read the whole response must
// never observe it still in flight.
void mark_complete(connection* c) {
  if (c->state != conn_state::idle) {
    c->loop->core->num_in_flight--;
    c->state = conn_state::idle;
  }
}

// After the last bytes of a response: close (drain / no keep-alive) or serve the next request.
void finish_response(connection* c) {
  if (!c->keep_alive || c->loop->draining)
    begin_shutdown(c);
  else
    dispatch_next(c);
}

// Hands the next pipelined request to the handler once the previous response is complete.
void dispatch_next(connection* c) {
  if (c->closing || c->shutting_down || c->state != conn_state::idle)
    return;
  if (c->pending.empty()) {
    start_reading(c);
    return;
  }
  pending_item item = std::move(c->pending.front());
  c->pending.pop_front();
  if (item.error_status != 0) {
    c->keep_alive = false;
    write_complete_response(c, item.error_status, "application/json",
                            error_json(item.error_message, "invalid_request_error"));
    begin_shutdown(c);
    return;
  }
  loop_state* loop = c->loop;
  c->seq = loop->next_seq++;
  c->keep_alive = item.keep_alive;
  c->state = conn_state::awaiting;
  c->closed_flag = std::make_shared<std::atomic<bool>>(false);
  loop->core->num_in_flight++;
  auto responder = std::make_shared<http_responder>(loop->core, c->id, c->seq, c->closed_flag);
  try {
    loop->handler(std::move(item.request), std::move(responder));
  } catch (...) {
    // The handler's copy of the responder is gone: its destructor answers 500.
  }
}

// --- http_parser callbacks (loop thread) ---

connection* conn_of(http_parser* p) { return static_cast<connection*>(p->data); }

int on_message_begin(http_parser* p) {
  connection* c = conn_of(p);
  c->building = http_request{};
  c->last_was_value = false;
  c->body_bytes = 0;
  return 0;
}

int on_url(http_parser* p, const char* at, size_t len) {
  conn_of(p)->building.path.append(at, len);
  return 0;
}

int on_header_field(http_parser* p, const char* at, size_t len) {
  connection* c = conn_of(p);
  auto& headers = c->building.headers;
  if (headers.empty() || c->last_was_value)
    headers.emplace_back();
  headers.back().first += lowercase(std::string(at, len));
  c->last_was_value = false;
  return 0;
}

int on_header_value(http_parser* p, const char* at, size_t len) {
  connection* c = conn_of(p);
  if (c->building.headers.empty())
    return 0;
  c->building.headers.back().second.append(at, len);
  c->last_was_value = true;
  return 0;
}

int reject_too_large(connection* c) {
  c->fail_status = 413;
  c->fail_message = "request body exceeds the limit of " +
                    std::to_string(http_server::max_body_bytes) + " bytes";
  return -1;
}

int on_headers_complete(http_parser* p) {
  connection* c = conn_of(p);
  if ((p->flags & F_CONTENTLENGTH) && p->content_length > http_server::max_body_bytes)
    return reject_too_large(c);
  // curl waits a second for "100 Continue" before sending a large body.
  if (lowercase(c->building.header("expect")) == "100-continue" &&
      c->state == conn_state::idle && c->pending.empty())
    write_raw(c, "HTTP/1.1 100 Continue\r\n\r\n");
  return 0;
}

int on_body(http_parser* p, const char* at, size_t len) {
  connection* c = conn_of(p);
  c->body_bytes += len;
  if (c->body_bytes > http_server::max_body_bytes)
    return reject_too_large(c);
  c->building.body.append(at, len);
  return 0;
}

int on_message_complete(http_parser* p) {
  connection* c = conn_of(p);
  pending_item item;
  item.request = std::move(c->building);
  item.request.method = http_method_str(static_cast<http_method>(p->method));
  std::string url = std::move(item.request.path);
  size_t q = url.find('?');
  item.request.path = url.substr(0, q);
  item.request.query = q == std::string::npos ? "" : url.substr(q + 1);
  item.keep_alive = http_should_keep_alive(p) != 0;
  c->pending.push_back(std::move(item));
  c->building = http_request{};
  return 0;
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<connection*>(stream->data);
  if (nread < 0) { // EOF or error: the client went away
    close_connection(c);
    return;
  }
  if (nread == 0 || c->shutting_down || c->parse_failed)
    return;
  size_t parsed = http_parser_execute(&c->parser, &c->loop->settings, buf->base,
                                      static_cast<size_t>(nread));
  bool failed = HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || c->parser.upgrade ||
                parsed != static_cast<size_t>(nread);
  if (failed) {
    pending_item item;
    if (c->fail_status != 0) {
      item.error_status = c->fail_status;
      item.error_message = c->fail_message;
    } else {
      item.error_status = 400;
      item.error_message = c->parser.upgrade
                               ? std::string("protocol upgrade is not supported")
                               : std::string("malformed HTTP request: ") +
                                     http_errno_description(HTTP_PARSER_ERRNO(&c->parser));
    }
    c->pending.push_back(std::move(item));
    c->parse_failed = true;
  }
  if (c->pending.size() >= max_pending_per_connection && c->reading) {
    uv_read_stop(stream);
    c->reading = false;
  }
  dispatch_next(c);
}

void on_connection(uv_stream_t* server, int status) {
  auto* loop = static_cast<loop_state*>(server->data);
  if (status < 0)
    return;
  auto* c = new connection{};
  c->loop = loop;
  c->id = loop->next_connection_id++;
  uv_tcp_init(&loop->loop, &c->tcp);
  uv_timer_init(&loop->loop, &c->linger);
  c->tcp.data = c;
  c->linger.data = c;
  loop->connections.emplace(c->id, c);
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp)) < 0 || loop->draining) {
    close_connection(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  start_reading(c);
}

connection* find_connection(loop_state* loop, const http_op& op) {
  auto it = loop->connections.find(op.connection_id);
  if (it == loop->connections.end())
    return nullptr;
  connection* c = it->second;
  if (c->closing || c->seq != op.seq)
    return nullptr;
  return c;
}

std::vector<connection*> all_connections(loop_state* loop) {
  std::vector<connection*> out;
  for (auto& [id, c] : loop->connections)
    out.push_back(c);
  return out;
}

void close_listener(loop_state* loop) {
  if (!loop->listener_open)
    return;
  loop->listener_open = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&loop->listener), nullptr);
}

void handle_op(loop_state* loop, http_op& op) {
  switch (op.kind) {
  case http_op::stop_accepting:
    close_listener(loop);
    loop->draining = true;
    for (connection* c : all_connections(loop))
      if (c->state == conn_state::idle)
        begin_shutdown(c);
    break;
  case http_op::stop: {
    loop->stopping = true;
    close_listener(loop);
    for (connection* c : all_connections(loop))
      close_connection(c);
    {
      std::lock_guard<std::mutex> guard(loop->core->mutex);
      loop->core->open = false;
      loop->core->async = nullptr;
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&loop->async), nullptr);
    break;
  }
  case http_op::send:
    if (connection* c = find_connection(loop, op); c && c->state == conn_state::awaiting) {
      mark_complete(c);
      write_complete_response(c, op.status, op.content_type, op.data);
      finish_response(c);
    }
    break;
  case http_op::start_stream:
    if (connection* c = find_connection(loop, op); c && c->state == conn_state::awaiting) {
      write_raw(c, response_head(c, op.status, op.content_type,
                                 "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\n"));
      c->state = conn_state::streaming;
    }
    break;
  case http_op::write:
    if (connection* c = find_connection(loop, op); c && c->state == conn_state::streaming) {
      char size[32];
      std::snprintf(size, sizeof size, "%zx\r\n", op.data.size());
      write_raw(c, size + op.data + "\r\n");
    }
    break;
  case http_op::end_stream:
    if (connection* c = find_connection(loop, op); c && c->state == conn_state::streaming) {
      mark_complete(c);
      write_raw(c, "0\r\n\r\n");
      finish_response(c);
    }
    break;
  case http_op::dropped:
    if (connection* c = find_connection(loop, op)) {
      if (c->state == conn_state::awaiting) {
        mark_complete(c);
        write_complete_response(c, 500, "application/json",
                                error_json("the server dropped the request without a response",
                                           "server_error"));
        finish_response(c);
      } else if (c->state == conn_state::streaming) {
        mark_complete(c);
        write_raw(c, "0\r\n\r\n");
        finish_response(c);
      }
    }
    break;
  }
  if (op.done)
    op.done->set_value();
}

void on_async(uv_async_t* async) {
  auto* loop = static_cast<loop_state*>(async->data);
  std::vector<http_op> ops;
  {
    std::lock_guard<std::mutex> guard(loop->core->mutex);
    ops.swap(loop->core->ops);
  }
  for (auto& op : ops) {
    if (loop->stopping) { // everything is closed; just release waiters
      if (op.done)
        op.done->set_value();
      continue;
    }
    handle_op(loop, op);
  }
}

void on_listener_error_closed(uv_handle_t*) {}

} // namespace

// --- http_server -------------------------------------------------------------------------------

http_server::http_server(std::string host, int port, handler h)
    : host_(std::move(host)), port_(port), handler_(std::move(h)),
      core_(std::make_shared<http_server_core>()) {}

http_server::~http_server() { stop(); }

int http_server::start() {
  std::lock_guard<std::mutex> guard(lifecycle_mutex_);
  if (started_)
    throw std::logic_error("http_server::start called twice");
  auto loop = std::make_unique<loop_state>();
  loop->core = core_;
  loop->handler = handler_;
  loop->settings = http_parser_settings{};
  loop->settings.on_message_begin = on_message_begin;
  loop->settings.on_url = on_url;
  loop->settings.on_header_field = on_header_field;
  loop->settings.on_header_value = on_header_value;
  loop->settings.on_headers_complete = on_headers_complete;
  loop->settings.on_body = on_body;
  loop->settings.on_message_complete = on_message_complete;
  std::string where = host_ + ":" + std::to_string(port_);

  if (int rc = uv_loop_init(&loop->loop); rc < 0)
    throw std::runtime_error("cannot start the HTTP loop: " + std::string(uv_strerror(rc)));
  uv_tcp_init(&loop->loop, &loop->listener);
  loop->listener.data = loop.get();
  auto fail = [&](const std::string& what, int rc) {
    uv_close(reinterpret_cast<uv_handle_t*>(&loop->listener), on_listener_error_closed);
    uv_run(&loop->loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop->loop);
    throw std::runtime_error("cannot " + what + " " + where + ": " + uv_strerror(rc));
  };
  sockaddr_storage addr{};
  int rc = host_.find(':') != std::string::npos
               ? uv_ip6_addr(host_.c_str(), port_, reinterpret_cast<sockaddr_in6*>(&addr))
               : uv_ip4_addr(host_.c_str(), port_, reinterpret_cast<sockaddr_in*>(&addr));
  if (rc < 0)
    fail("parse the address", rc);
  if ((rc = uv_tcp_bind(&loop->listener, reinterpret_cast<sockaddr*>(&addr), 0)) < 0)
    fail("bind", rc);
  if ((rc = uv_listen(reinterpret_cast<uv_stream_t*>(&loop->listener), 128, on_connection)) < 0)
    fail("listen on", rc);
  loop->listener_open = true;

  sockaddr_storage bound{};
  int len = sizeof bound;
  uv_tcp_getsockname(&loop->listener, reinterpret_cast<sockaddr*>(&bound), &len);
  int bound_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  uv_async_init(&loop->loop, &loop->async, on_async);
  loop->async.data = loop.get();
  {
    std::lock_guard<std::mutex> core_guard(core_->mutex);
    core_->async = &loop->async;
    core_->open = true;
  }
  loop_ = std::move(loop);
  uv_loop_t* uv_loop = &loop_->loop;
  thread_ = std::thread([uv_loop] { uv_run(uv_loop, UV_RUN_DEFAULT); });
  started_ = true;
  port_ = bound_port;
  return bound_port;
}

void http_server::stop_accepting() {
  std::lock_guard<std::mutex> guard(lifecycle_mutex_);
  if (!started_ || stopped_)
    return;
  if (std::this_thread::get_id() == thread_.get_id())
    throw std::logic_error("http_server::stop_accepting called from the loop thread");
  std::promise<void> done;
  auto future = done.get_future();
  http_op op = make_op(http_op::stop_accepting);
  op.done = &done;
  if (core_->post(std::move(op)))
    future.wait();
}

size_t http_server::num_in_flight() const { return core_->num_in_flight.load(); }

void http_server::stop() {
  std::lock_guard<std::mutex> guard(lifecycle_mutex_);
  if (!started_ || stopped_)
    return;
  if (std::this_thread::get_id() == thread_.get_id())
    throw std::logic_error("http_server::stop called from the loop thread");
  stopped_ = true;
  core_->post(make_op(http_op::stop));
  thread_.join();
  uv_loop_close(&loop_->loop);
  loop_.reset();
}

} // namespace ordo
