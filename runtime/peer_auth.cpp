#include "runtime/peer_auth.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace ordo {

namespace {

using clock_type = std::chrono::steady_clock;

int ms_left(clock_type::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on `fd` until `until`; false on timeout or error.
bool wait_for(int fd, short events, clock_type::time_point until) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(until));
    if (n > 0)
      return (p.revents & (events | POLLHUP | POLLERR)) != 0;
    if (n == 0 || errno != EINTR)
      return false;
  }
}

// A connected socket, with its TLS session when there is one.
struct channel {
  int fd = -1;
  SSL* ssl = nullptr;
};

// What an SSL call that did not complete needs: "" = retry (after waiting), else why it failed.
// `fault` is set when TLS itself refused (an alert, a bad record), not the network.
std::string tls_wait(const channel& c, int r, clock_type::time_point until, const std::string& what, bool& fault) {
  const int e = SSL_get_error(c.ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
    ERR_clear_error();
    if (!wait_for(c.fd, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, until))
      return what + ": no answer within the deadline";
    return "";
  }
  const std::string detail = tls_error_text();
  if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && detail.empty()))
    return what + ": the peer closed the connection";
  fault = true;
  return what + ": TLS: " + (detail.empty() ? std::string("error ") + std::to_string(e) : detail);
}

// Reads exactly `n` bytes before `until`; "" or what went wrong.
std::string read_exactly(const channel& c, uint8_t* out, size_t n, clock_type::time_point until, bool& fault) {
  size_t got = 0;
  while (got < n) {
    if (c.ssl) {
      ERR_clear_error();
      const int r = SSL_read(c.ssl, out + got, static_cast<int>(n - got));
      if (r > 0) {
        got += static_cast<size_t>(r);
        continue;
      }
      if (auto why = tls_wait(c, r, until, std::to_string(got) + " of " + std::to_string(n) + " bytes", fault);
          !why.empty())
        return why;
      continue;
    }
    if (!wait_for(c.fd, POLLIN, until))
      return "no answer within the deadline (" + std::to_string(got) + " of " + std::to_string(n) + " bytes)";
    const ssize_t r = ::recv(c.fd, out + got, n - got, 0);
    if (r == 0)
      return "the peer closed the connection after " + std::to_string(got) + " of " + std::to_string(n) + " bytes";
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return std::string("read failed: ") + std::strerror(errno);
    }
    got += static_cast<size_t>(r);
  }
  return "";
}

std::string write_all(const channel& c, const uint8_t* p, size_t n, clock_type::time_point until, bool& fault) {
  size_t sent = 0;
  while (sent < n) {
    if (c.ssl) {
      ERR_clear_error();
      const int r = SSL_write(c.ssl, p + sent, static_cast<int>(n - sent));
      if (r > 0) {
        sent += static_cast<size_t>(r);
        continue;
      }
      if (auto why = tls_wait(c, r, until, "sending", fault); !why.empty())
        return why;
      continue;
    }
    if (!wait_for(c.fd, POLLOUT, until))
      return "could not send within the deadline";
    const ssize_t r = ::send(c.fd, p + sent, n - sent, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return std::string("send failed: ") + std::strerror(errno);
    }
    sent += static_cast<size_t>(r);
  }
  return "";
}

// The client side of the TLS handshake before `until`; "" or what went wrong.
std::string tls_handshake(const channel& c, clock_type::time_point until) {
  for (;;) {
    ERR_clear_error();
    const int r = SSL_do_handshake(c.ssl);
    if (r == 1)
      return "";
    bool fault = false;
    std::string why = tls_wait(c, r, until, "the TLS handshake", fault);
    if (why.empty())
      continue;
    if (const long v = SSL_get_verify_result(c.ssl); v != X509_V_OK)
      return "the peer's certificate does not verify against security.cafile: " +
             std::string(X509_verify_cert_error_string(v));
    return why + " (the peer may have security.tls off, or a certificate of another CA)";
  }
}

} // namespace

auth_nonce random_nonce() {
  auth_nonce n{};
  size_t got = 0;
  while (got < n.size()) {
    const ssize_t r = ::getrandom(n.data() + got, n.size() - got, 0);
    if (r > 0)
      got += static_cast<size_t>(r);
  }
  return n;
}

auth_mac preamble_mac(const secret_key& key, char role, const auth_nonce& server, const auth_nonce& client) {
  uint8_t msg[1 + 2 * 32];
  msg[0] = static_cast<uint8_t>(role);
  std::memcpy(msg + 1, server.data(), 32);
  std::memcpy(msg + 33, client.data(), 32);
  auth_mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), msg, sizeof msg, out.data(), &len);
  return out;
}

bool preamble_mac_matches(const secret_key& key, char role, const auth_nonce& server, const auth_nonce& client,
                          const uint8_t* got) {
  const auth_mac want = preamble_mac(key, role, server, client);
  return CRYPTO_memcmp(want.data(), got, want.size()) == 0;
}

auth_connect_result authenticated_connect(const std::string& host, uint16_t port, const secret_key& key,
                                          int timeout_ms, const tls_context* tls) {
  auth_connect_result out;
  const auto until = clock_type::now() + std::chrono::milliseconds(timeout_ms);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0) {
    out.why = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return out;
  }
  int fd = -1;
  std::string last = "no address";
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = std::string("connect: ") + std::strerror(errno);
      ::close(fd);
      fd = -1;
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (!wait_for(fd, POLLOUT, until) || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      last = err ? std::string("connect: ") + std::strerror(err) : std::string("connect: no answer within the deadline");
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) {
    out.why = last;
    return out;
  }
  channel ch{fd, nullptr};
  auto fail = [&](std::string why, bool refused) {
    if (ch.ssl)
      SSL_free(ch.ssl);
    ::close(fd);
    out.why = std::move(why);
    out.refused = refused;
    return out;
  };
  bool fault = false;
  if (tls) {
    uint8_t banner[auth_challenge_bytes];
    if (auto w = read_exactly(ch, banner, sizeof banner, until, fault); !w.empty())
      return fail("the peer's TLS banner: " + w, false);
    if (std::memcmp(banner, tls_banner, sizeof banner) != 0)
      return fail("the peer does not use TLS (its security.tls is off, or it is not an ordo actor port), while "
                  "this process has security.tls = \"on\"",
                  true);
    std::string why;
    ch.ssl = tls->new_session(fd, false, why);
    if (!ch.ssl)
      return fail(why, false);
    if (auto w = tls_handshake(ch, until); !w.empty())
      return fail(w, true);
    if (auto w = write_all(ch, reinterpret_cast<const uint8_t*>(auth_tls_opener), auth_tls_opener_bytes, until, fault);
        !w.empty())
      return fail("opening the preamble: " + w, fault);
  }
  auth_nonce server{}, client = random_nonce();
  if (auto why = read_exactly(ch, server.data(), server.size(), until, fault); !why.empty())
    return fail("the peer's challenge: " + why +
                    (fault ? " (the peer refused this process's certificate, or it is not one of this deployment's)"
                           : ""),
                fault);
  if (!tls && std::memcmp(server.data(), tls_banner, server.size()) == 0)
    return fail("the peer requires TLS: set security.tls = \"on\" with security.certificate, security.key and "
                "security.cafile (made by `ordo certs`)",
                true);
  uint8_t answer[auth_answer_bytes];
  const auth_mac mine = preamble_mac(key, 'C', server, client);
  std::memcpy(answer, client.data(), 32);
  std::memcpy(answer + 32, mine.data(), 32);
  if (auto why = write_all(ch, answer, sizeof answer, until, fault); !why.empty())
    return fail("sending the answer: " + why, fault);
  uint8_t proof[auth_proof_bytes];
  if (auto why = read_exactly(ch, proof, sizeof proof, until, fault); !why.empty())
    return fail("the peer did not prove it holds this deployment's secret: " + why, true);
  if (!preamble_mac_matches(key, 'S', server, client, proof))
    return fail("the peer did not prove it holds this deployment's secret (its answer to the challenge does not "
                "verify): it is not one of this deployment's processes, or its security.secret_file differs",
                true);
  // BASP's first bytes must still be in the socket (epoll sees those), not decrypted here.
  if (ch.ssl && SSL_pending(ch.ssl) > 0)
    return fail("the peer sent more than its proof before the actor handshake", true);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  out.fd = fd;
  out.tls = ch.ssl;
  return out;
}

} // namespace ordo
