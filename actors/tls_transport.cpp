#include "actors/tls_transport.hpp"

#include <stdexcept>

#include <sys/socket.h>

#include <caf/io/network/acceptor_impl.hpp>
#include <caf/io/network/native_socket.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/policy/tcp.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "runtime/peer_auth.hpp"

namespace ordo {

namespace {

namespace net = caf::io::network;

// The stream policy: SSL_read / SSL_write instead of recv / send (a server session runs its
// handshake inside its first reads). A call that would block reports
// success with 0 bytes, as CAF's tcp policy does for EAGAIN; anything else is a failure.
class tls_policy {
public:
  explicit tls_policy(SSL* ssl) : ssl_(ssl) {}

  net::rw_state read_some(size_t& result, net::native_socket fd, void* buf, size_t len) {
    result = 0;
    if (len == 0)
      return net::rw_state::success;
    ERR_clear_error();
    const int r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(len, 1 << 30)));
    if (r > 0) {
      result = static_cast<size_t>(r);
      return net::rw_state::success;
    }
    return would_block(r) ? net::rw_state::success : net::rw_state::failure;
  }

  net::rw_state write_some(size_t& result, net::native_socket, const void* buf, size_t len) {
    result = 0;
    if (len == 0)
      return net::rw_state::success;
    ERR_clear_error();
    const int r = SSL_write(ssl_, buf, static_cast<int>(std::min<size_t>(len, 1 << 30)));
    if (r > 0) {
      result = static_cast<size_t>(r);
      return net::rw_state::success;
    }
    return would_block(r) ? net::rw_state::success : net::rw_state::failure;
  }

  // Plaintext OpenSSL already decrypted is invisible to epoll: read it in the same event.
  bool must_read_more(net::native_socket, size_t) { return SSL_pending(ssl_) > 0; }

private:
  bool would_block(int r) {
    const int e = SSL_get_error(ssl_, r);
    ERR_clear_error();
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
  }

  SSL* ssl_;
};

// CAF's scribe_impl with the TLS policy (CAF 0.17.6 keeps its stream member's policy fixed).
class tls_scribe final : public caf::io::scribe {
public:
  tls_scribe(net::default_multiplexer& mpx, net::native_socket fd, SSL* ssl)
      : scribe(net::conn_hdl_from_socket(fd)), ssl_(ssl), stream_(mpx, fd, ssl) {}

  ~tls_scribe() override { SSL_free(ssl_); } // the stream closes the socket

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

private:
  SSL* ssl_;
  bool launched_ = false;
  net::stream_impl<tls_policy> stream_;
};

// CAF's doorman_impl, making TLS scribes.
class tls_doorman final : public caf::io::doorman {
public:
  tls_doorman(net::default_multiplexer& mpx, net::native_socket fd, std::shared_ptr<const tls_context> tls)
      : doorman(net::accept_hdl_from_socket(fd)), acceptor_(mpx, fd), tls_(std::move(tls)) {}

  bool new_connection() override {
    if (detached())
      return false;
    auto& mpx = acceptor_.backend();
    const net::native_socket fd = acceptor_.accepted_socket();
    // The banner, in clear, before TLS (runtime/peer_auth.hpp): 32 bytes into a fresh socket's
    // empty send buffer, so the send completes at once.
    std::string why;
    SSL* ssl = nullptr;
    if (::send(fd, tls_banner, auth_challenge_bytes, MSG_DONTWAIT | MSG_NOSIGNAL) !=
            static_cast<ssize_t>(auth_challenge_bytes) ||
        !(ssl = tls_->new_session(fd, true, why))) {
      net::close_socket(fd);
      return true; // keep accepting
    }
    caf::io::scribe_ptr sp = make_tls_scribe(mpx, fd, ssl);
    auto hdl = sp->hdl();
    parent()->add_scribe(std::move(sp));
    return doorman::new_connection(&mpx, hdl);
  }
  void graceful_shutdown() override {
    acceptor_.graceful_shutdown();
    detach(&acceptor_.backend(), false);
  }
  void launch() override { acceptor_.start(this); }
  std::string addr() const override {
    auto x = net::local_addr_of_fd(acceptor_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = net::local_port_of_fd(acceptor_.fd());
    return x ? *x : 0;
  }
  void add_to_loop() override { acceptor_.activate(this); }
  void remove_from_loop() override { acceptor_.passivate(); }

private:
  net::acceptor_impl<caf::policy::tcp> acceptor_;
  std::shared_ptr<const tls_context> tls_;
};

} // namespace

caf::io::scribe_ptr make_tls_scribe(net::default_multiplexer& mpx, int fd, ssl_st* ssl) {
  net::nonblocking(fd, true);
  net::tcp_nodelay(fd, true);
  return caf::make_counted<tls_scribe>(mpx, fd, ssl);
}

caf::io::doorman_ptr make_tls_doorman(net::default_multiplexer& mpx, const std::string& host, uint16_t port,
                                      std::shared_ptr<const tls_context> tls) {
  auto fd = net::new_tcp_acceptor_impl(port, host.c_str(), true);
  if (!fd)
    throw std::runtime_error("cannot listen on tcp://" + host + ":" + std::to_string(port) + ": " +
                             to_string(fd.error()));
  return caf::make_counted<tls_doorman>(mpx, *fd, std::move(tls));
}

} // namespace ordo
