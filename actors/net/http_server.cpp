#include "actors/net/http_server.hpp"

#include "runtime/completion_api.hpp"

#include <http_parser.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <future>
#include <stdexcept>
#include <unordered_map>

namespace ordo {

// --- cross-thread op queue ----------------------------------------------------------------------

namespace {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct http_op {
  enum kind_t { send, start_stream, write, end_stream, dropped, stop_accepting, stop } kind;
  uint64_t connection_id = 0;
  uint64_t seq = 0;
  int status = 0;
  std::string content_type;
  std::string data;
  header_list headers;
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

// One request from dispatch to the end of its response. `phase` is the responder's view (done
// once send / end_stream / drop was called), `gone` the connection's; whichever comes first
// under `mutex` decides whether the hang-up callback runs.
struct http_exchange {
  enum class phase_t { awaiting, streaming, done };

  http_exchange(uint64_t connection_id, uint64_t seq) : connection_id(connection_id), seq(seq) {}

  const uint64_t connection_id;
  const uint64_t seq;
  std::mutex mutex;
  phase_t phase = phase_t::awaiting;
  bool gone = false;
  std::function<void()> on_hangup;
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

// The same shape and escaping as every error the frontend answers (runtime/completion_api.hpp).
std::string write_error_body(int status, const std::string& message, const char* type) {
  if (!type)
    type = status >= 500 ? "server_error" : "invalid_request_error";
  return render_error(api_error{status, message, type});
}

// --- http_responder ----------------------------------------------------------------------------

using exchange_phase = http_exchange::phase_t;

http_responder::http_responder(std::shared_ptr<http_server_core> core,
                               std::shared_ptr<http_exchange> exchange)
    : core_(std::move(core)), exchange_(std::move(exchange)) {}

http_responder::~http_responder() {
  std::function<void()> released; // destroyed outside the lock
  std::lock_guard<std::mutex> guard(exchange_->mutex);
  released = std::move(exchange_->on_hangup);
  if (exchange_->phase == exchange_phase::done)
    return;
  exchange_->phase = exchange_phase::done;
  if (!exchange_->gone)
    core_->post(make_op(http_op::dropped, exchange_->connection_id, exchange_->seq));
}

void http_responder::send(int status, std::string content_type, std::string body,
                          header_list headers) {
  std::function<void()> released;
  std::lock_guard<std::mutex> guard(exchange_->mutex);
  if (exchange_->phase != exchange_phase::awaiting)
    return;
  exchange_->phase = exchange_phase::done;
  released = std::move(exchange_->on_hangup);
  if (exchange_->gone)
    return;
  http_op op = make_op(http_op::send, exchange_->connection_id, exchange_->seq, status,
                       std::move(content_type), std::move(body));
  op.headers = std::move(headers);
  core_->post(std::move(op));
}

void http_responder::start_stream(int status, std::string content_type) {
  std::lock_guard<std::mutex> guard(exchange_->mutex);
  if (exchange_->phase != exchange_phase::awaiting)
    return;
  exchange_->phase = exchange_phase::streaming;
  if (!exchange_->gone)
    core_->post(make_op(http_op::start_stream, exchange_->connection_id, exchange_->seq, status,
                        std::move(content_type)));
}

void http_responder::write(std::string chunk) {
  std::lock_guard<std::mutex> guard(exchange_->mutex);
  if (exchange_->phase != exchange_phase::streaming || exchange_->gone || chunk.empty())
    return;
  core_->post(make_op(http_op::write, exchange_->connection_id, exchange_->seq, 0, {},
                      std::move(chunk)));
}

void http_responder::end_stream() {
  std::function<void()> released;
  std::lock_guard<std::mutex> guard(exchange_->mutex);
  if (exchange_->phase != exchange_phase::streaming)
    return;
  exchange_->phase = exchange_phase::done;
  released = std::move(exchange_->on_hangup);
  if (!exchange_->gone)
    core_->post(make_op(http_op::end_stream, exchange_->connection_id, exchange_->seq));
}

bool http_responder::closed() const {
  std::lock_guard<std::mutex> guard(exchange_->mutex);
  return exchange_->gone;
}

void http_responder::on_hangup(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> guard(exchange_->mutex);
    if (exchange_->phase == exchange_phase::done)
      return;
    if (!exchange_->gone) {
      exchange_->on_hangup = std::move(f);
      return;
    }
  }
  if (f)
    f();
}

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

enum class conn_state { idle, awaiting, streaming }; // idle: no request with the handler
enum class parse_phase { between, headers, body };   // where the parser is in the next request
enum class timer_kind { none, idle, header, body, linger };
enum class conn_slot { refused, normal, reserve };

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
  size_t num_normal = 0;
  size_t num_reserve = 0;
  std::unordered_map<uint64_t, connection*> connections;
  std::shared_ptr<http_server_core> core;
  http_server::handler handler;
  http_server_options options;
  http_parser_settings settings;
  // One read buffer for every connection: on_read hands each read to the parser, which copies
  // what it keeps, before libuv reads again.
  char read_buffer[64 * 1024];
};

namespace {

using loop_state = http_server::loop_state;

constexpr size_t max_pending_per_connection = 16; // pipelined requests before reading pauses
constexpr uint64_t linger_ms = 2000;              // after our FIN, wait this long for the peer's

struct connection {
  uv_tcp_t tcp;
  uv_timer_t timer; // the one timer: idle, header, body or linger (`timer_armed` says which)
  loop_state* loop = nullptr;
  uint64_t id = 0;
  conn_slot slot = conn_slot::refused;
  http_parser parser;
  parse_phase parsing = parse_phase::between;
  http_request building;
  bool last_was_value = false;
  size_t body_bytes = 0;
  int fail_status = 0; // set by a parser callback that rejects the request
  std::string fail_message;
  bool parse_failed = false; // input after a parse error is discarded
  std::vector<pending_item> pending; // a vector: nothing allocated while empty
  conn_state state = conn_state::idle;
  std::shared_ptr<http_exchange> exchange; // the request last handed to the handler
  bool keep_alive = true;
  bool reading = false;
  bool shutting_down = false;
  bool closing = false;
  timer_kind timer_armed = timer_kind::none;
  int handles_open = 2;
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

void close_connection(connection* c);
void dispatch_next(connection* c);
void update_timer(connection* c);

void on_handle_closed(uv_handle_t* h) {
  auto* c = static_cast<connection*>(h->data);
  if (--c->handles_open == 0)
    delete c;
}

// Loop thread: the connection of `ex` closed; a response not yet complete is a hang-up.
void notify_closed(http_exchange& ex) {
  std::function<void()> hangup;
  {
    std::lock_guard<std::mutex> guard(ex.mutex);
    if (ex.gone)
      return;
    ex.gone = true;
    hangup = std::move(ex.on_hangup);
    if (ex.phase == exchange_phase::done)
      hangup = nullptr;
  }
  if (hangup) {
    try {
      hangup();
    } catch (...) { // the callback's failure is not the connection's
    }
  }
}

// Hard close: both handles; pending writes are cancelled. Frees `c` once libuv is done.
void close_connection(connection* c) {
  if (c->closing)
    return;
  c->closing = true;
  loop_state* loop = c->loop;
  if (c->slot == conn_slot::normal)
    loop->num_normal--;
  else if (c->slot == conn_slot::reserve)
    loop->num_reserve--;
  if (c->state != conn_state::idle) {
    loop->core->num_in_flight--;
    c->state = conn_state::idle;
  }
  loop->connections.erase(c->id);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), on_handle_closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&c->timer), on_handle_closed);
  if (c->exchange)
    notify_closed(*c->exchange);
}

// Any failed write (EPIPE, ECONNRESET, ...) closes this connection and nothing else.
void on_written(uv_write_t* req, int status) {
  auto* w = reinterpret_cast<write_req*>(req);
  if (status < 0)
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
  *buf = uv_buf_init(c->loop->read_buffer, sizeof c->loop->read_buffer);
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

void start_reading(connection* c) {
  if (c->reading || c->closing)
    return;
  if (uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), on_alloc, on_read) == 0)
    c->reading = true;
}

void on_timer(uv_timer_t* t);

void on_shutdown(uv_shutdown_t* req, int status) {
  auto* c = static_cast<connection*>(req->data);
  delete req;
  if (c->closing)
    return;
  if (status < 0) {
    close_connection(c);
    return;
  }
  c->timer_armed = timer_kind::linger;
  uv_timer_start(&c->timer, on_timer, linger_ms, 0);
}

// Graceful close after the last response: FIN once the writes are flushed, then discard input
// until the peer closes (closing with unread input would reset the connection and could destroy
// the response before the client reads it).
void begin_shutdown(connection* c) {
  if (c->shutting_down || c->closing)
    return;
  c->shutting_down = true;
  c->pending.clear();
  c->timer_armed = timer_kind::none;
  uv_timer_stop(&c->timer);
  start_reading(c);
  auto* req = new uv_shutdown_t{};
  req->data = c;
  if (uv_shutdown(req, reinterpret_cast<uv_stream_t*>(&c->tcp), on_shutdown) < 0) {
    delete req;
    close_connection(c);
  }
}

std::string response_head(connection* c, int status, const std::string& content_type,
                          const std::string& extra_headers) {
  bool close = !c->keep_alive || c->loop->draining;
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty())
    head += "Content-Type: " + content_type + "\r\n";
  head += extra_headers;
  head += close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n";
  return head;
}

// Header lines from a responder's list; one holding CR or LF would split the response.
std::string header_lines(const header_list& headers) {
  std::string out;
  for (const auto& [name, value] : headers) {
    if (name.empty() || name.find_first_of("\r\n:") != std::string::npos ||
        value.find_first_of("\r\n") != std::string::npos)
      continue;
    out += name + ": " + value + "\r\n";
  }
  return out;
}

void write_complete_response(connection* c, int status, const std::string& content_type,
                             const std::string& body, const std::string& extra_headers = {}) {
  std::string data = response_head(c, status, content_type,
                                   extra_headers + "Content-Length: " +
                                       std::to_string(body.size()) + "\r\n");
  data += body;
  write_raw(c, std::move(data));
}

// Every error response the server writes itself (never the handler's) goes through here, so
// each is shaped and counted once; counted first, so a client that read it sees it counted.
void write_error(connection* c, int status, const std::string& message) {
  if (const auto& on_error = c->loop->options.on_error) {
    try {
      on_error(status);
    } catch (...) { // counting must not break serving
    }
  }
  std::string extra = status == 503 ? "Retry-After: 1\r\n" : "";
  write_complete_response(c, status, "application/json", write_error_body(status, message), extra);
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

// Hands the front pending request to the handler, or answers its error and closes.
void dispatch_front(connection* c) {
  pending_item item = std::move(c->pending.front());
  c->pending.erase(c->pending.begin());
  if (item.error_status != 0) {
    c->keep_alive = false;
    write_error(c, item.error_status, item.error_message);
    begin_shutdown(c);
    return;
  }
  loop_state* loop = c->loop;
  uint64_t seq = loop->next_seq++;
  c->keep_alive = item.keep_alive;
  c->state = conn_state::awaiting;
  c->exchange = std::make_shared<http_exchange>(c->id, seq);
  loop->core->num_in_flight++;
  auto responder = std::make_shared<http_responder>(loop->core, c->exchange);
  try {
    loop->handler(std::move(item.request), std::move(responder));
  } catch (...) {
    // The handler's copy of the responder is gone: its destructor answers 500.
  }
}

// Hands the next pipelined request to the handler once the previous response is complete.
void dispatch_next(connection* c) {
  if (!c->closing && !c->shutting_down && c->state == conn_state::idle) {
    if (c->pending.empty())
      start_reading(c);
    else
      dispatch_front(c);
  }
  update_timer(c);
}

// --- timers (see the diagram in the header) ---

uint64_t timeout_ms(const http_server_options& o, timer_kind kind) {
  switch (kind) {
  case timer_kind::idle: return o.idle_timeout_ms;
  case timer_kind::header: return o.header_timeout_ms;
  case timer_kind::body: return o.body_timeout_ms;
  default: return 0;
  }
}

// Seconds as a person writes them: "10", "0.3".
std::string format_seconds(uint64_t ms) {
  if (ms % 1000 == 0)
    return std::to_string(ms / 1000);
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(ms) / 1000.0);
  return text;
}

// Arms the timer the connection's state calls for; a timer keeps running while its kind stays.
void update_timer(connection* c) {
  if (c->closing || c->shutting_down)
    return;
  timer_kind want = timer_kind::none;
  if (c->state == conn_state::idle)
    want = c->parsing == parse_phase::headers ? timer_kind::header
           : c->parsing == parse_phase::body  ? timer_kind::body
                                              : timer_kind::idle;
  if (want == c->timer_armed)
    return;
  c->timer_armed = want;
  uint64_t ms = timeout_ms(c->loop->options, want);
  if (ms == 0)
    uv_timer_stop(&c->timer);
  else
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

void on_timer(uv_timer_t* t) {
  auto* c = static_cast<connection*>(t->data);
  timer_kind kind = c->timer_armed;
  c->timer_armed = timer_kind::none;
  const http_server_options& o = c->loop->options;
  switch (kind) {
  case timer_kind::header:
  case timer_kind::body:
    c->parse_failed = true;
    c->keep_alive = false;
    write_error(c, 408,
                kind == timer_kind::header
                    ? "request headers not received within server.header_timeout_s = " +
                          format_seconds(o.header_timeout_ms) + " s"
                    : "request body not received within server.body_timeout_s = " +
                          format_seconds(o.body_timeout_ms) + " s");
    begin_shutdown(c);
    break;
  case timer_kind::idle:
  case timer_kind::linger:
    close_connection(c);
    break;
  case timer_kind::none:
    break;
  }
}

// --- http_parser callbacks (loop thread) ---

connection* conn_of(http_parser* p) { return static_cast<connection*>(p->data); }

int on_message_begin(http_parser* p) {
  connection* c = conn_of(p);
  c->building = http_request{};
  c->last_was_value = false;
  c->body_bytes = 0;
  c->parsing = parse_phase::headers;
  return 0;
}

int on_url(http_parser* p, const char* at, size_t len) {
  conn_of(p)->building.path.append(at, len);
  return 0;
}

// A parser callback refusing the request: the server answers `status` in its turn.
int reject(connection* c, int status, std::string message) {
  c->fail_status = status;
  c->fail_message = std::move(message);
  return -1;
}

// RFC 9110 token characters. The system http_parser is built lenient and lets a space into a
// header name; "Content-Length : 5" must not pass as some other header (request smuggling).
bool is_token_char(unsigned char ch) {
  return std::isalnum(ch) || (ch != 0 && std::strchr("!#$%&'*+-.^_`|~", ch) != nullptr);
}

int on_header_field(http_parser* p, const char* at, size_t len) {
  connection* c = conn_of(p);
  for (size_t i = 0; i < len; ++i)
    if (!is_token_char(static_cast<unsigned char>(at[i])))
      return reject(c, 400, "malformed HTTP request: invalid character in a header name");
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
  return reject(c, 413,
                "request body exceeds the limit of " +
                    std::to_string(c->loop->options.max_body_bytes) + " bytes");
}

bool is_cap_exempt(const http_server_options& o, unsigned method, const std::string& url) {
  if (method != HTTP_GET)
    return false;
  std::string path = url.substr(0, url.find('?'));
  return std::find(o.cap_exempt_paths.begin(), o.cap_exempt_paths.end(), path) !=
         o.cap_exempt_paths.end();
}

int on_headers_complete(http_parser* p) {
  connection* c = conn_of(p);
  const http_server_options& o = c->loop->options;
  c->parsing = parse_phase::body;
  if (c->slot == conn_slot::reserve && !is_cap_exempt(o, p->method, c->building.path))
    return reject(c, 503,
                  "connection limit of " + std::to_string(o.max_connections) +
                      " reached; retry later");
  // Refused here, before any body: after an upgrade request the parser would stop reading.
  if (p->upgrade)
    return reject(c, 400, "protocol upgrade is not supported");
  if ((p->flags & F_CONTENTLENGTH) && p->content_length > o.max_body_bytes)
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
  if (c->body_bytes > c->loop->options.max_body_bytes)
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
  c->parsing = parse_phase::between;
  return 0;
}

void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  auto* c = static_cast<connection*>(stream->data);
  if (nread < 0) { // EOF or error: the client went away (see NOTE(hangup))
    close_connection(c);
    return;
  }
  if (nread == 0 || c->shutting_down || c->parse_failed)
    return;
  size_t parsed = http_parser_execute(&c->parser, &c->loop->settings, buf->base,
                                      static_cast<size_t>(nread));
  http_errno error = HTTP_PARSER_ERRNO(&c->parser);
  if (error != HPE_OK || parsed != static_cast<size_t>(nread)) {
    pending_item item;
    item.error_status = c->fail_status != 0 ? c->fail_status : 400;
    item.error_message = c->fail_status != 0 ? c->fail_message
                                             : std::string("malformed HTTP request: ") +
                                                   http_errno_description(error);
    c->pending.push_back(std::move(item));
    c->parse_failed = true;
    c->parsing = parse_phase::between;
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
  uv_timer_init(&loop->loop, &c->timer);
  c->tcp.data = c;
  c->timer.data = c;
  loop->connections.emplace(c->id, c);
  // Accepted even when refused: libuv stops watching the listener while a connection waits.
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp)) < 0 || loop->draining) {
    close_connection(c);
    return;
  }
  if (loop->num_normal < loop->options.max_connections) {
    c->slot = conn_slot::normal;
    loop->num_normal++;
  } else if (loop->num_reserve < http_server::num_reserve_connections) {
    c->slot = conn_slot::reserve;
    loop->num_reserve++;
  } else {
    close_connection(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  http_parser_init(&c->parser, HTTP_REQUEST);
  c->parser.data = c;
  start_reading(c);
  update_timer(c);
}

connection* find_connection(loop_state* loop, const http_op& op) {
  auto it = loop->connections.find(op.connection_id);
  if (it == loop->connections.end())
    return nullptr;
  connection* c = it->second;
  if (c->closing || !c->exchange || c->exchange->seq != op.seq)
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
      write_complete_response(c, op.status, op.content_type, op.data, header_lines(op.headers));
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
        write_error(c, 500, "the server dropped the request without a response");
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

// The first address of `host` (a literal or a name) with `port`. Throws naming the host.
sockaddr_storage resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr)
    throw std::runtime_error("cannot resolve the host \"" + host + "\": " +
                             (rc != 0 ? gai_strerror(rc) : "no address"));
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, std::min<size_t>(found->ai_addrlen, sizeof addr));
  ::freeaddrinfo(found);
  auto net_port = htons(static_cast<uint16_t>(port));
  if (addr.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = net_port;
  else
    reinterpret_cast<sockaddr_in*>(&addr)->sin_port = net_port;
  return addr;
}

} // namespace

// --- http_server -------------------------------------------------------------------------------

http_server::http_server(http_server_options options, handler h)
    : options_(std::move(options)), handler_(std::move(h)),
      core_(std::make_shared<http_server_core>()) {}

http_server::~http_server() { stop(); }

int http_server::start() {
  std::lock_guard<std::mutex> guard(lifecycle_mutex_);
  if (started_)
    throw std::logic_error("http_server::start called twice");
  if (options_.port < 0 || options_.port > 65535)
    throw std::runtime_error("cannot listen on " + options_.host + ":" +
                             std::to_string(options_.port) + ": the port is out of range");
  std::string where = options_.host + ":" + std::to_string(options_.port);
  sockaddr_storage addr = resolve(options_.host, options_.port);

  auto loop = std::make_unique<loop_state>();
  loop->core = core_;
  loop->handler = handler_;
  loop->options = options_;
  loop->settings = http_parser_settings{};
  loop->settings.on_message_begin = on_message_begin;
  loop->settings.on_url = on_url;
  loop->settings.on_header_field = on_header_field;
  loop->settings.on_header_value = on_header_value;
  loop->settings.on_headers_complete = on_headers_complete;
  loop->settings.on_body = on_body;
  loop->settings.on_message_complete = on_message_complete;

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
  int rc;
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
  thread_ = std::thread([uv_loop] {
    // libuv writes with writev, which raises SIGPIPE on a reset peer and would kill the
    // process; blocked on this thread, the write fails with EPIPE and that connection closes.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    uv_run(uv_loop, UV_RUN_DEFAULT);
  });
  started_ = true;
  options_.port = bound_port;
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

namespace {

bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

} // namespace

bool has_bearer(const http_request& req, const std::string& key) {
  static const std::string prefix = "Bearer ";
  const std::string auth = req.header("authorization");
  return auth.compare(0, prefix.size(), prefix) == 0 && same_secret(auth.substr(prefix.size()), key);
}

} // namespace ordo
