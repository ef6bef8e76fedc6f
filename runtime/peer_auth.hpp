// The preamble every connection to a CAF port of ordo passes before CAF's BASP sees one byte
// (issue 36, docs/security.md): a mutual challenge and response over the deployment secret.
//
//   acceptor → connector   server nonce (32 bytes)
//   connector → acceptor   client nonce (32) ‖ HMAC-SHA256(secret, "C" ‖ server nonce ‖ client nonce)
//   acceptor → connector   HMAC-SHA256(secret, "S" ‖ server nonce ‖ client nonce)
//
// The acceptor reads exactly 64 bytes, within a deadline, and hands the socket to BASP only when
// the MAC verifies; the connector hands its socket to BASP only when the acceptor's MAC verifies.
// So a stranger's bytes, forged BASP headers included, reach only this fixed-size exchange, and a
// listener that answers junk is refused before BASP parses it. Pure POSIX and libcrypto; the
// connector side blocks (call it off the actor threads).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "runtime/deployment_secret.hpp"
#include "runtime/tls.hpp"

namespace ordo {

using auth_nonce = std::array<uint8_t, 32>;
using auth_mac = std::array<uint8_t, 32>;

inline constexpr size_t auth_challenge_bytes = 32; // what the acceptor sends first
inline constexpr size_t auth_answer_bytes = 64;    // the connector's nonce and MAC
inline constexpr size_t auth_proof_bytes = 32;     // the acceptor's MAC

// security.tls = "on" (runtime/tls.hpp): the acceptor sends `tls_banner` in clear, the
// connector checks it and starts TLS, then opens the preamble inside TLS with the 8-byte opener, so
// the acceptor writes nothing more before the handshake is done. A plain connector that reads the
// banner as its challenge knows the peer wants TLS; a TLS connector that reads anything else, that
// the peer does not use TLS.
inline constexpr char auth_tls_opener[] = "ordo-tls";
inline constexpr size_t auth_tls_opener_bytes = sizeof auth_tls_opener - 1;
inline constexpr char tls_banner[] = "ordo:needs-TLS (security.tls=on)";
static_assert(sizeof tls_banner - 1 == auth_challenge_bytes);

auth_nonce random_nonce();
// HMAC-SHA256(key, role ‖ server ‖ client); role 'C' (the connector's) or 'S' (the acceptor's).
auth_mac preamble_mac(const secret_key& key, char role, const auth_nonce& server, const auth_nonce& client);
// Whether `got` (32 bytes) is preamble_mac(...), in constant time.
bool preamble_mac_matches(const secret_key& key, char role, const auth_nonce& server, const auth_nonce& client,
                          const uint8_t* got);

// The connector's side, blocking, bounded by `timeout_ms` in all: resolves `host`, connects to
// `port`, (with `tls`: completes a mutual TLS handshake and sends the opener,) passes the preamble
// and returns the connected socket (non-blocking, TCP_NODELAY) and its TLS session, whose
// ownership passes to the caller. On failure returns -1 and sets `why`; `refused` tells a peer
// that does not prove the secret (or answers junk, or fails TLS) from one that cannot be reached.
struct auth_connect_result {
  int fd = -1;
  ssl_st* tls = nullptr; // the established session when `tls` was given
  bool refused = false;
  std::string why;
};
auth_connect_result authenticated_connect(const std::string& host, uint16_t port, const secret_key& key,
                                          int timeout_ms, const tls_context* tls = nullptr);

} // namespace ordo
