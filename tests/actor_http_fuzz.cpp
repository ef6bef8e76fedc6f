// A seeded, structure-aware fuzzer against a real http_server on loopback: valid requests
// (GET/POST, Content-Length and chunked bodies, keep-alive and close, sequential and pipelined)
// and the same mutated (bad method, bad version, broken header lines, bad, huge or wrong
// Content-Length, bad chunk sizes, upgrades, very long header lines, NULs, byte noise,
// truncations). Each case runs on its own connection with bounded reads.
//
// The oracle has two parts. What the generator knows for sure: a valid request gets a 2xx with
// its echo, garbage gets a 4xx and never a 2xx, a truncated request gets nothing. And, for
// mutations whose effect depends on where they land (noise, NULs, a wrong length), a reference
// run of http_parser over the same bytes, which says what the transport must do with them.
// ORDO_HTTP_FUZZ_SEED=<n> replays another seed.
#include "actors/net/http_client.hpp"
#include "actors/net/http_server.hpp"

#include <catch.hpp>
#include <http_parser.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace ordo;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t default_seed = 20261203;
constexpr int num_cases = 2000;
constexpr size_t max_body = 4096; // the fuzz server's max_body_bytes
constexpr auto read_limit = 2000ms;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

// What the fuzz handler answers: enough to tell which request, with which body, it served.
std::string echo_of(const std::string& method, const std::string& path, const std::string& body) {
  char hash[32];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(body)));
  return method + " " + path + " " + std::to_string(body.size()) + " " + hash;
}

// Bytes as a C string literal would show them, cut at `limit`.
std::string printable(const std::string& bytes, size_t limit = 800) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < limit; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\r')
      out += "\\r";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\\')
      out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else
      out.push_back(static_cast<char>(c));
  }
  if (bytes.size() > limit)
    out += "...(" + std::to_string(bytes.size()) + " bytes)";
  return out;
}

// --- generator ---------------------------------------------------------------------------------

enum class mutation {
  none, bad_method, bad_version, broken_header, bad_content_length, huge_content_length,
  bad_chunk_size, upgrade, long_header, // garbage: a 4xx, never a 2xx
  wrong_content_length, nul, noise,     // effect depends on where it lands: the reference decides
  truncation,                           // nothing comes back for it
};

const char* name_of(mutation m) {
  switch (m) {
  case mutation::none: return "none";
  case mutation::bad_method: return "bad_method";
  case mutation::bad_version: return "bad_version";
  case mutation::broken_header: return "broken_header";
  case mutation::bad_content_length: return "bad_content_length";
  case mutation::huge_content_length: return "huge_content_length";
  case mutation::bad_chunk_size: return "bad_chunk_size";
  case mutation::upgrade: return "upgrade";
  case mutation::long_header: return "long_header";
  case mutation::wrong_content_length: return "wrong_content_length";
  case mutation::nul: return "nul";
  case mutation::noise: return "noise";
  case mutation::truncation: return "truncation";
  }
  return "?";
}

bool is_garbage(mutation m) { return m >= mutation::bad_method && m <= mutation::long_header; }

struct request_parts {
  std::string method = "GET";
  std::string target = "/";
  std::string version = "HTTP/1.1";
  std::vector<std::string> header_lines;
  std::string body_wire; // as sent (chunked framing included)
  std::string body;      // as the handler sees it
  bool chunked = false;
  bool keep_alive = true;

  std::string head() const {
    std::string h = method + " " + target + " " + version + "\r\n";
    for (const auto& line : header_lines)
      h += line + "\r\n";
    return h + "\r\n";
  }
  std::string bytes() const { return head() + body_wire; }
  std::string path() const { return target.substr(0, target.find('?')); }
  std::string echo() const { return echo_of(method, path(), body); }
};

struct generator {
  std::mt19937_64 rng;

  explicit generator(uint64_t seed) : rng(seed) {}

  size_t below(size_t n) { return static_cast<size_t>(rng() % n); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }

  std::string token(size_t max_len) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    std::string t;
    for (size_t n = 1 + below(max_len); n > 0; --n)
      t.push_back(alphabet[below(sizeof alphabet - 1)]);
    return t;
  }

  std::string body(size_t max_len) {
    std::string b;
    for (size_t n = below(max_len + 1); n > 0; --n)
      b.push_back(chance(80) ? static_cast<char>(' ' + below(95)) : static_cast<char>(below(256)));
    return b;
  }

  // `body` in 1..n chunks of random sizes, with an extension or a trailer now and then.
  std::string chunked(const std::string& body) {
    std::string wire;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t n = std::min(body.size() - pos, 1 + below(body.size()));
      char size[32];
      std::snprintf(size, sizeof size, chance(50) ? "%zx" : "%zX", n);
      wire += std::string(size) + (chance(10) ? ";ext=1" : "") + "\r\n" + body.substr(pos, n) +
              "\r\n";
      pos += n;
    }
    return wire + (chance(10) ? "0\r\nX-Trailer: t\r\n\r\n" : "0\r\n\r\n");
  }

  // A valid request; `last` may close the connection.
  request_parts valid(bool last) {
    request_parts r;
    r.method = chance(50) ? "GET" : "POST";
    r.target = "/" + token(12) + (chance(30) ? "?q=" + token(8) + "&x=1" : "");
    if (chance(10))
      r.version = "HTTP/1.0";
    r.header_lines.push_back("Host: 127.0.0.1");
    for (size_t n = below(4); n > 0; --n)
      r.header_lines.push_back("X-" + token(10) + ": " + token(30));
    bool has_body = r.method == "POST" ? !chance(5) : chance(10);
    if (has_body) {
      r.body = body(chance(10) ? 3000 : 200);
      r.chunked = r.version == "HTTP/1.1" && chance(40);
      if (r.chunked) {
        r.header_lines.push_back(chance(50) ? "Transfer-Encoding: chunked"
                                            : "transfer-encoding: chunked");
        r.body_wire = chunked(r.body);
      } else {
        r.header_lines.push_back("Content-Length: " + std::to_string(r.body.size()));
        r.body_wire = r.body;
      }
    }
    bool close = last && chance(30);
    if (r.version == "HTTP/1.0") {
      if (!close)
        r.header_lines.push_back("Connection: keep-alive");
    } else if (close) {
      r.header_lines.push_back("Connection: close");
    } else if (chance(20)) {
      r.header_lines.push_back("Connection: keep-alive");
    }
    r.keep_alive = !close;
    return r;
  }

  template <class T>
  const T& pick(const std::vector<T>& options) {
    return options[below(options.size())];
  }

  void insert_header(request_parts& r, std::string line) {
    r.header_lines.insert(r.header_lines.begin() + static_cast<long>(below(r.header_lines.size() + 1)),
                          std::move(line));
  }

  void remove_length_headers(request_parts& r) {
    std::vector<std::string> kept;
    for (auto& line : r.header_lines)
      if (line.rfind("Content-Length", 0) != 0 && line.rfind("Transfer-Encoding", 0) != 0 &&
          line.rfind("transfer-encoding", 0) != 0)
        kept.push_back(line);
    r.header_lines = kept;
  }

  // Structure-aware mutations of one request; byte-level ones work on the assembled bytes.
  std::string mutate(request_parts& r, mutation m) {
    switch (m) {
    case mutation::bad_method:
      r.method = pick<std::string>({"GXT", "get", "G3T", "", "@@", "GETPOST", "P\tOST"});
      break;
    case mutation::bad_version:
      // Not "HTTQ/1.1": the system http_parser is built lenient and checks only the 'H'.
      r.version = pick<std::string>({"HTTP/x.1", "HTTP/1.1.1", "HTTP/1,1", "http/1.1",
                                     "HTTP/1.", "XTTP/1.1", "HTTP/1.1x"});
      break;
    case mutation::broken_header:
      insert_header(r, pick<std::string>({"NoColonHere", "Bad Name: v", "X-Ctl: a\x01z",
                                          ": empty-name", "X-Del: a\x7fz"}));
      break;
    case mutation::bad_content_length:
      if (chance(25)) {
        remove_length_headers(r);
        r.header_lines.push_back("Content-Length: 1");
        r.header_lines.push_back("Content-Length: 2");
        r.body_wire = "ab";
      } else {
        insert_header(r, "Content-Length: " + pick<std::string>({"abc", "-5", "1x", "1 2", "+3"}));
      }
      break;
    case mutation::huge_content_length:
      remove_length_headers(r);
      if (chance(30)) { // a chunked body that runs over the limit: 413 at the running count
        r.header_lines.push_back("Transfer-Encoding: chunked");
        r.body_wire = chunked(std::string(max_body + 1 + below(2000), 'b'));
      } else { // refused from the headers: no body follows
        r.header_lines.push_back("Content-Length: " +
                                 pick<std::string>({"99999999999999999999999", "1000000",
                                                    std::to_string(max_body + 1)}));
        r.body_wire.clear();
      }
      break;
    case mutation::bad_chunk_size: {
      remove_length_headers(r);
      r.header_lines.push_back("Transfer-Encoding: chunked");
      r.body_wire = pick<std::string>({"zz", "-1", "fffffffffffffffffffff", "g", " "}) +
                    "\r\nabc\r\n0\r\n\r\n";
      break;
    }
    case mutation::upgrade:
      r.header_lines.push_back("Connection: Upgrade");
      r.header_lines.push_back("Upgrade: websocket");
      break;
    case mutation::long_header:
      insert_header(r, "X-Long: " + std::string(100 * 1024, 'a'));
      break;
    case mutation::wrong_content_length: {
      remove_length_headers(r);
      long delta = static_cast<long>(1 + below(5)) * (chance(50) ? 1 : -1);
      long length = std::max(0L, static_cast<long>(r.body.size()) + delta);
      r.header_lines.push_back("Content-Length: " + std::to_string(length));
      r.body_wire = r.body;
      break;
    }
    default:
      break;
    }
    std::string bytes = r.bytes();
    size_t head_size = r.head().size();
    switch (m) {
    case mutation::nul:
      bytes.insert(below(head_size - 2), 1, '\0');
      break;
    case mutation::noise:
      for (size_t n = 1 + below(3); n > 0; --n)
        bytes[below(bytes.size())] = static_cast<char>(below(256));
      break;
    case mutation::truncation:
      bytes.resize(below(bytes.size()));
      break;
    default:
      break;
    }
    return bytes;
  }

  mutation pick_mutation() {
    if (chance(30))
      return mutation::none;
    return static_cast<mutation>(1 + below(static_cast<size_t>(mutation::truncation)));
  }
};

// One connection's script: rounds sent one after another, each round's requests pipelined.
// Only the last round may hold a mutated request (at `mutated`); those after it are valid.
struct fuzz_case {
  std::vector<std::vector<request_parts>> rounds;
  std::vector<std::string> round_bytes;
  mutation kind = mutation::none;
  size_t mutated = 0; // index in the last round
  size_t num_before_mutated = 0; // requests before the mutated one, over all rounds
};

fuzz_case make_case(generator& g) {
  fuzz_case fc;
  size_t num_rounds = 1 + g.below(3);
  for (size_t round = 0; round < num_rounds; ++round) {
    bool last_round = round + 1 == num_rounds;
    std::vector<request_parts> requests;
    size_t n = 1 + g.below(g.chance(30) ? 4 : 1);
    for (size_t i = 0; i < n; ++i)
      requests.push_back(g.valid(last_round && i + 1 == n));
    fc.rounds.push_back(requests);
  }
  auto& last = fc.rounds.back();
  fc.kind = g.pick_mutation();
  fc.mutated = g.below(last.size());
  for (size_t r = 0; r + 1 < fc.rounds.size(); ++r)
    fc.num_before_mutated += fc.rounds[r].size();
  fc.num_before_mutated += fc.mutated;
  if (fc.kind == mutation::truncation)
    last.resize(fc.mutated + 1); // nothing follows a truncation
  for (auto& round : fc.rounds) {
    std::string bytes;
    for (size_t i = 0; i < round.size(); ++i) {
      if (&round == &last && i == fc.mutated && fc.kind != mutation::none)
        bytes += g.mutate(round[i], fc.kind);
      else
        bytes += round[i].bytes();
    }
    fc.round_bytes.push_back(bytes);
  }
  return fc;
}

// --- reference: what the transport must do with these bytes --------------------------------------

struct expected_outcome {
  std::vector<std::string> echoes; // the 2xx responses, in order
  bool closes_after = false;       // the last of them said Connection: close
  int error_status = 0;            // the 4xx after them, 0 if none
};

struct reference_state {
  std::string url, body;
  size_t body_bytes = 0;
  int fail_status = 0;
  std::vector<std::pair<std::string, bool>> complete; // echo, keep-alive
};

reference_state& ref_of(http_parser* p) { return *static_cast<reference_state*>(p->data); }

// The server's own decisions on top of http_parser (413 from the headers or the running body,
// 400 for an upgrade or a header name that is not a token), here.
expected_outcome reference(const std::string& bytes) {
  http_parser_settings settings{};
  settings.on_message_begin = [](http_parser* p) {
    ref_of(p).url.clear();
    ref_of(p).body.clear();
    ref_of(p).body_bytes = 0;
    return 0;
  };
  settings.on_url = [](http_parser* p, const char* at, size_t len) {
    ref_of(p).url.append(at, len);
    return 0;
  };
  settings.on_header_field = [](http_parser* p, const char* at, size_t len) {
    for (size_t i = 0; i < len; ++i) {
      auto ch = static_cast<unsigned char>(at[i]);
      if (!std::isalnum(ch) && (ch == 0 || !std::strchr("!#$%&'*+-.^_`|~", ch))) {
        ref_of(p).fail_status = 400;
        return -1;
      }
    }
    return 0;
  };
  settings.on_headers_complete = [](http_parser* p) {
    if (p->upgrade || ((p->flags & F_CONTENTLENGTH) && p->content_length > max_body)) {
      ref_of(p).fail_status = p->upgrade ? 400 : 413;
      return -1;
    }
    return 0;
  };
  settings.on_body = [](http_parser* p, const char* at, size_t len) {
    auto& s = ref_of(p);
    s.body_bytes += len;
    if (s.body_bytes > max_body) {
      s.fail_status = 413;
      return -1;
    }
    s.body.append(at, len);
    return 0;
  };
  settings.on_message_complete = [](http_parser* p) {
    auto& s = ref_of(p);
    std::string method = http_method_str(static_cast<http_method>(p->method));
    s.complete.emplace_back(echo_of(method, s.url.substr(0, s.url.find('?')), s.body),
                            http_should_keep_alive(p) != 0);
    return 0;
  };
  reference_state state;
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = &state;
  size_t parsed = http_parser_execute(&parser, &settings, bytes.data(), bytes.size());
  bool failed = HTTP_PARSER_ERRNO(&parser) != HPE_OK || parsed != bytes.size();

  expected_outcome out;
  for (auto& [echo, keep_alive] : state.complete) {
    out.echoes.push_back(echo);
    if (!keep_alive) {
      out.closes_after = true;
      return out; // the server answers it, then discards the rest
    }
  }
  if (failed)
    out.error_status = state.fail_status != 0 ? state.fail_status : 400;
  return out;
}

// --- client ------------------------------------------------------------------------------------

// The one HTTP client (actors/net/http_client.hpp), writing raw bytes in pieces.

// Sends `bytes` in `pieces` writes. False if the server closed first (it may, after an error).
bool send_in_pieces(http_client& client, const std::string& bytes, size_t pieces) {
  size_t pos = 0;
  for (size_t i = 0; i < pieces && pos < bytes.size(); ++i) {
    size_t n = i + 1 == pieces ? bytes.size() - pos : (bytes.size() - pos) / (pieces - i);
    if (!client.send_raw(bytes.substr(pos, n)))
      return false;
    pos += n;
  }
  return client.send_raw(bytes.substr(pos));
}

// One whole response (1xx skipped) with a Content-Length, or nullopt with `error` set.
std::optional<http_response> read_whole(http_client& client, std::string& error) {
  http_response r = client.read_response();
  if (r.status == 0 || !r.error.empty()) {
    error = r.error;
    return std::nullopt;
  }
  if (r.header("content-length").empty()) {
    error = "response without Content-Length";
    return std::nullopt;
  }
  return r;
}

// --- running a case ----------------------------------------------------------------------------

// Runs one case; returns "" or what went wrong.
std::string run_case(int port, const fuzz_case& fc, generator& g) {
  http_client client(port, static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(read_limit).count()));
  if (!client.connected())
    return "cannot connect";
  std::string error;
  size_t num_answered = 0; // 2xx responses so far
  int final_status = 0;    // the 4xx, if one came

  // Every round but the last is valid: each request gets its own echo, in order.
  for (size_t r = 0; r + 1 < fc.rounds.size(); ++r) {
    if (!send_in_pieces(client, fc.round_bytes[r], 1 + g.below(3)))
      return "send failed in round " + std::to_string(r);
    for (const auto& request : fc.rounds[r]) {
      auto resp = read_whole(client, error);
      if (!resp)
        return "round " + std::to_string(r) + ": no response: " + error;
      if (resp->status != 200 || resp->body != request.echo())
        return "round " + std::to_string(r) + ": got " + std::to_string(resp->status) + " \"" +
               printable(resp->body) + "\", want 200 \"" + printable(request.echo()) + "\"";
      num_answered++;
    }
  }

  // The last round: the reference says what must come back.
  const std::string& bytes = fc.round_bytes.back();
  expected_outcome want = reference(bytes);
  send_in_pieces(client, bytes, 1 + g.below(4)); // may fail once the server refused and closed
  for (size_t i = 0; i < want.echoes.size(); ++i) {
    auto resp = read_whole(client, error);
    if (!resp)
      return "response " + std::to_string(i) + " missing: " + error;
    if (resp->status != 200 || resp->body != want.echoes[i])
      return "response " + std::to_string(i) + ": got " + std::to_string(resp->status) + " \"" +
             printable(resp->body) + "\", want 200 \"" + printable(want.echoes[i]) + "\"";
    bool closing = want.closes_after && i + 1 == want.echoes.size();
    if (resp->header("connection") != (closing ? "close" : "keep-alive"))
      return "response " + std::to_string(i) + ": Connection: " + resp->header("connection");
    num_answered++;
  }
  if (want.error_status != 0) {
    auto resp = read_whole(client, error);
    if (!resp)
      return "error response missing: " + error;
    if (resp->status != want.error_status || resp->header("connection") != "close")
      return "got " + std::to_string(resp->status) + " (Connection: " + resp->header("connection") +
             "), want " + std::to_string(want.error_status) + " and a close";
    if (resp->body.rfind("{\"error\":{\"code\":null,\"message\":\"", 0) != 0)
      return "error body is not OpenAI-shaped: " + printable(resp->body);
    final_status = resp->status;
  } else if (!want.closes_after) {
    client.shutdown_write(); // an incomplete tail: the client's EOF ends the connection
  }
  if (!client.peer_closed())
    return "the connection did not close cleanly (bytes after the last response, or no close)";

  // What the generator knows, independently of the reference.
  size_t total = 0;
  for (const auto& round : fc.rounds)
    total += round.size();
  bool closes_early = false;
  for (size_t i = 0; i < fc.rounds.back().size() && i < fc.mutated; ++i)
    closes_early |= !fc.rounds.back()[i].keep_alive;
  if (fc.kind == mutation::none && (num_answered != total || final_status != 0))
    return "a valid case got " + std::to_string(num_answered) + " of " + std::to_string(total) +
           " answers, final status " + std::to_string(final_status);
  if (is_garbage(fc.kind) && !closes_early &&
      (num_answered != fc.num_before_mutated || final_status < 400 || final_status >= 500))
    return "garbage got " + std::to_string(num_answered) + " 2xx (" +
           std::to_string(fc.num_before_mutated) + " requests before it), final status " +
           std::to_string(final_status);
  if (fc.kind == mutation::truncation && (num_answered != fc.num_before_mutated || final_status))
    return "a truncated request got an answer";
  return "";
}

std::string describe(uint64_t seed, int index, const fuzz_case& fc) {
  std::string text = "seed " + std::to_string(seed) + ", case " + std::to_string(index) +
                     ", mutation " + name_of(fc.kind) + " of request " +
                     std::to_string(fc.mutated) + " in the last round\n";
  for (size_t r = 0; r < fc.round_bytes.size(); ++r)
    text += "round " + std::to_string(r) + ": \"" + printable(fc.round_bytes[r]) + "\"\n";
  return text;
}

} // namespace

TEST_CASE("fuzz: valid and mutated requests never crash, stall or fool the server") {
  uint64_t seed = default_seed;
  if (const char* env = std::getenv("ORDO_HTTP_FUZZ_SEED"))
    seed = std::strtoull(env, nullptr, 10);
  INFO("seed " << seed << " (replay with ORDO_HTTP_FUZZ_SEED=" << seed << ")");

  http_server_options options;
  options.max_body_bytes = max_body;
  http_server server(options, [](http_request req, std::shared_ptr<http_responder> w) {
    w->send(200, "text/plain", echo_of(req.method, req.path, req.body));
  });
  int port = server.start();

  generator g(seed);
  auto start = std::chrono::steady_clock::now();
  std::vector<int> per_mutation(static_cast<size_t>(mutation::truncation) + 1, 0);
  for (int i = 0; i < num_cases; ++i) {
    fuzz_case fc = make_case(g);
    per_mutation[static_cast<size_t>(fc.kind)]++;
    std::string failure = run_case(port, fc, g);
    if (!failure.empty())
      FAIL(describe(seed, i, fc) << failure);
    if ((i + 1) % 100 == 0) {
      http_client health(port, 2);
      std::string error;
      REQUIRE(health.send_raw("GET /health HTTP/1.1\r\n\r\n"));
      auto r = read_whole(health, error);
      INFO("after case " << i << ": " << error);
      REQUIRE(r);
      REQUIRE(r->status == 200);
    }
  }
  auto took = std::chrono::steady_clock::now() - start;
  for (size_t m = 0; m < per_mutation.size(); ++m)
    CHECK(per_mutation[m] > 0); // every kind of mutation ran
  CHECK(took < 30s);
  CHECK(server.num_in_flight() == 0);
}
