// TLS connections CAF's brokers can own (issue 36, docs/security.md): a scribe whose bytes go
// through an OpenSSL session, and a doorman whose accepted connections are such scribes. The
// acceptor of actors/auth_acceptor.cpp listens with the doorman when security.tls is on, runs the
// preamble over TLS, then hands the scribe to BASP exactly as a plain one; the connector hands
// BASP a scribe around a session it already established. CAF's own OpenSSL module is not used: its
// acceptor has no caps (docs/security.md, the spike).
// Threads: scribes and doormen live in CAF's multiplexer thread.
#pragma once

#include <memory>
#include <string>

#include <caf/io/doorman.hpp>
#include <caf/io/scribe.hpp>
#include <caf/io/network/default_multiplexer.hpp>

#include "runtime/tls.hpp"

namespace ordo {

// A scribe on connected socket `fd` (owned from here on) speaking TLS through `ssl` (owned): a
// server session (its handshake runs as bytes arrive) or an established client session.
caf::io::scribe_ptr make_tls_scribe(caf::io::network::default_multiplexer& mpx, int fd, ssl_st* ssl);

// A doorman listening on host:port (0 = any) whose connections are server-side TLS scribes of
// `tls`, each sent tls_banner in clear first (runtime/peer_auth.hpp). Throws std::runtime_error
// naming the address when it cannot listen.
caf::io::doorman_ptr make_tls_doorman(caf::io::network::default_multiplexer& mpx, const std::string& host,
                                      uint16_t port, std::shared_ptr<const tls_context> tls);

} // namespace ordo
