#include "actors/auth_acceptor.hpp"

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <stdexcept>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <spdlog/spdlog.h>

#include "actors/tls_transport.hpp"
#include "runtime/metrics.hpp"
#include "runtime/peer_auth.hpp"

namespace ordo {

namespace {

using auth_tick_atom = caf::atom_constant<caf::atom("atick")>;

caf::actor basp_broker_of(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

struct pending_connection {
  bool opened = false; // TLS: the opener arrived (the handshake is done) and the challenge is sent
  auth_nonce server{};
  uint64_t serial = 0; // handles are fd numbers and get reused: a deadline names its serial too
};

struct acceptor_state {
  std::map<caf::io::connection_handle, pending_connection> pending;
  uint64_t next_serial = 0;
  static inline const char* name = "auth_acceptor";
};

using broker_ptr = caf::io::stateful_broker<acceptor_state>*;

// The listener's bound port, reported to the spawner once.
using bound_port = std::shared_ptr<std::promise<std::pair<uint16_t, std::string>>>;

caf::behavior acceptor(broker_ptr self, auth_acceptor_options opt, caf::actor basp, caf::strong_actor_ptr whom,
                       std::set<std::string> interfaces, bound_port bound) {
  // The doorman must be made inside the multiplexer's loop: a broker's init runs there.
  uint16_t port = 0;
  if (opt.tls) {
    try {
      auto& mpx = static_cast<caf::io::network::default_multiplexer&>(self->system().middleman().backend());
      caf::io::doorman_ptr door = make_tls_doorman(mpx, opt.host, opt.port, opt.tls);
      port = door->port();
      self->add_doorman(std::move(door));
    } catch (const std::exception& e) {
      bound->set_value({0, e.what()});
      self->quit();
      return {};
    }
  } else {
    auto door = self->add_tcp_doorman(opt.port, opt.host.c_str(), true);
    if (!door) {
      bound->set_value({0, self->system().render(door.error())});
      self->quit();
      return {};
    }
    port = door->second;
  }
  bound->set_value({port, ""});
  auto stats = opt.stats;
  auto close_pending = [self, stats](caf::io::connection_handle hdl) {
    if (self->state.pending.erase(hdl) > 0)
      --stats->pending;
    self->close(hdl);
  };
  auto send_challenge = [self](caf::io::connection_handle hdl, const pending_connection& p) {
    self->write(hdl, p.server.size(), p.server.data());
    self->flush(hdl);
    self->configure_read(hdl, caf::io::receive_policy::exactly(auth_answer_bytes));
  };
  return {
      [=](const caf::io::new_connection_msg& msg) {
        auto& st = self->state;
        ++stats->accepted;
        const int64_t live = opt.live ? opt.live() : 0;
        if (st.pending.size() >= opt.max_pending || live >= static_cast<int64_t>(opt.max_handed)) {
          ++stats->refused_busy;
          self->close(msg.handle);
          return;
        }
        pending_connection p;
        p.server = random_nonce();
        p.serial = ++st.next_serial;
        st.pending[msg.handle] = p;
        ++stats->pending;
        if (opt.tls) {
          // Nothing is written before the TLS handshake is done: the connector speaks first.
          self->configure_read(msg.handle, caf::io::receive_policy::exactly(auth_tls_opener_bytes));
        } else {
          send_challenge(msg.handle, p);
        }
        self->delayed_send(self, std::chrono::milliseconds(opt.deadline_ms), auth_tick_atom::value, msg.handle,
                           p.serial);
      },
      [=](const caf::io::new_data_msg& msg) {
        auto& st = self->state;
        auto it = st.pending.find(msg.handle);
        if (it == st.pending.end())
          return;
        if (opt.tls && !it->second.opened) {
          if (msg.buf.size() != auth_tls_opener_bytes ||
              std::memcmp(msg.buf.data(), auth_tls_opener, auth_tls_opener_bytes) != 0) {
            ++stats->refused_mac;
            close_pending(msg.handle);
            return;
          }
          it->second.opened = true;
          send_challenge(msg.handle, it->second);
          return;
        }
        if (msg.buf.size() != auth_answer_bytes)
          return;
        auth_nonce client{};
        std::memcpy(client.data(), msg.buf.data(), client.size());
        const auth_nonce server = it->second.server;
        if (!preamble_mac_matches(opt.key, 'C', server, client, reinterpret_cast<const uint8_t*>(msg.buf.data()) + 32)) {
          ++stats->refused_mac;
          close_pending(msg.handle);
          return;
        }
        st.pending.erase(it);
        --stats->pending;
        const auth_mac proof = preamble_mac(opt.key, 'S', server, client);
        self->write(msg.handle, proof.size(), proof.data());
        self->flush(msg.handle);
        // The socket's next read is armed with the policy in force when this handler returns:
        // BASP's header, which it reads first.
        self->configure_read(msg.handle, caf::io::receive_policy::exactly(caf::io::basp::header_size));
        caf::io::scribe_ptr sp = self->take(msg.handle);
        ++stats->authenticated;
        // BASP's own hand-over of a connection without a doorman: it registers `whom` under
        // `port`, writes its server handshake and reads the peer's (CAF 0.17.6).
        self->send(basp, caf::publish_atom::value, std::move(sp), port, whom, interfaces);
      },
      [=](auth_tick_atom, caf::io::connection_handle hdl, uint64_t serial) {
        auto it = self->state.pending.find(hdl);
        if (it == self->state.pending.end() || it->second.serial != serial)
          return;
        ++stats->refused_deadline;
        close_pending(hdl);
      },
      [=](const caf::io::connection_closed_msg& msg) {
        if (self->state.pending.erase(msg.handle) > 0) {
          --stats->pending;
          ++stats->refused_deadline;
        }
      },
      [=](const caf::io::acceptor_closed_msg&) { self->quit(); },
  };
}

} // namespace

auth_acceptor_handle spawn_auth_acceptor(caf::actor_system& sys, caf::strong_actor_ptr whom,
                                         std::set<std::string> interfaces, auth_acceptor_options options) {
  auto bound = std::make_shared<std::promise<std::pair<uint16_t, std::string>>>();
  auto result = bound->get_future();
  auth_acceptor_handle out;
  out.stats = options.stats;
  const std::string where = options.host + ":" + std::to_string(options.port);
  out.broker = sys.middleman().spawn_broker(acceptor, std::move(options), basp_broker_of(sys), std::move(whom),
                                            std::move(interfaces), bound);
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready)
    throw std::runtime_error("cannot listen on tcp://" + where + ": the acceptor did not start within 10 s");
  auto [port, why] = result.get();
  if (port == 0)
    throw std::runtime_error("cannot listen on tcp://" + where + ": " + why);
  out.port = port;
  return out;
}

std::string render_auth_acceptor_metrics(const auth_acceptor_stats& s) {
  metrics_registry r;
  const std::string help = "Connections to this process's actor port, by how the preamble ended (docs/security.md): "
                           "authenticated (handed to CAF), bad_mac (not the deployment's secret), deadline (no whole "
                           "answer in 2 s: idle, short or closed), busy (over the caps of 64 pending / 256 sessions)";
  r.counter("ordo_auth_connections_total", help, {{"outcome", "authenticated"}}).inc(s.authenticated.load());
  r.counter("ordo_auth_connections_total", help, {{"outcome", "bad_mac"}}).inc(s.refused_mac.load());
  r.counter("ordo_auth_connections_total", help, {{"outcome", "deadline"}}).inc(s.refused_deadline.load());
  r.counter("ordo_auth_connections_total", help, {{"outcome", "busy"}}).inc(s.refused_busy.load());
  r.gauge("ordo_auth_pending", "Connections in the preamble now").set(static_cast<double>(s.pending.load()));
  return r.render_prometheus();
}

caf::actor spawn_auth_connector(caf::actor_system& sys, const secret_key& key, uint32_t timeout_ms,
                                std::shared_ptr<const tls_context> tls) {
  return sys.spawn<caf::detached>([key, timeout_ms, tls](caf::event_based_actor* self) -> caf::behavior {
    return {
        [=](caf::connect_atom, const std::string& host, uint16_t port) {
          auto rp = self->make_response_promise();
          // Blocks this actor's own thread for at most timeout_ms.
          auth_connect_result r = authenticated_connect(host, port, key, static_cast<int>(timeout_ms), tls.get());
          if (r.fd < 0) {
            rp.deliver(caf::make_error(r.refused ? caf::sec::invalid_argument : caf::sec::cannot_connect_to_node,
                                       "tcp://" + host + ":" + std::to_string(port) + ": " + r.why));
            return rp;
          }
          auto& mpx = static_cast<caf::io::network::default_multiplexer&>(self->system().middleman().backend());
          // The scribe owns the fd (and the TLS session) from here on.
          caf::io::scribe_ptr sp = r.tls ? make_tls_scribe(mpx, r.fd, r.tls) : mpx.new_scribe(r.fd);
          rp.delegate(basp_broker_of(self->system()), caf::connect_atom::value, std::move(sp), port);
          return rp;
        },
    };
  });
}

} // namespace ordo
