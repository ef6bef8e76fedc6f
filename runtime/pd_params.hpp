// Signed P/D transfer parameters (issue 35, docs/security.md): what a prefill node's answer tells
// a decode node about where to pull, signed with the deployment secret, and the rule by which a
// decode node decides whether to pull at all. A client chooses no peer: the decode node pulls
// only from parameters a node of its deployment signed for this very prompt, or from a peer the
// operator listed in pd.peers. Pure: no CAF, no clock (callers pass `now`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "messages/request.hpp"
#include "runtime/deployment_secret.hpp"

namespace ordo {

// What a decode request's kv_transfer_params claim about the prefill node.
struct kv_params_claim {
  std::string engine_id;   // remote_engine_id
  std::string host;        // remote_host
  int32_t port = 0;        // remote_port (the prefill node's server.actor_port)
  std::string transfer_id; // the lease's id
  int64_t expires_at = 0;  // unix seconds; 0 = not claimed
  std::string signature;   // 64 hex digits of HMAC-SHA256; "" = unsigned
  bool names_peer() const { return !host.empty(); }
  std::string endpoint() const { return host + ":" + std::to_string(port); }
};

// Longest a signature may claim to stay valid, from now: a longer claim is refused.
inline constexpr int64_t kv_params_max_ttl_s = 3600 + 60;

// SHA-256 (hex) over what makes a prompt's cached bytes: its token ids, cache_salt and media
// spans. Equal on the prefill and the decode node for the same request body.
std::string prompt_hash(const completion_request& r);

// The text the signature covers: a version tag, engine id, endpoint, transfer id, the prompt's
// hash and the expiry, one per line.
std::string kv_params_message(const kv_params_claim& c, const std::string& prompt_hash);

// HMAC-SHA256 of kv_params_message under the deployment secret.
std::string sign_kv_params(const secret_key& key, const kv_params_claim& c, const std::string& prompt_hash);

// How a decode node came to trust a peer (it names it in the response's reason).
enum class peer_trust : uint8_t { none, signed_params, listed };

struct kv_params_verdict {
  peer_trust trust = peer_trust::none;
  std::string refusal; // "" when the pull may go ahead (or the claim names no peer)
};

// The rule: a claim naming a peer is accepted when its signature verifies under `key` (for this
// prompt, not expired, expiring within kv_params_max_ttl_s), or when its endpoint is in `peers`
// ("HOST:PORT", compared as written). A signature that is present but bad is refused even for a
// listed peer. `key` empty: this node holds no secret, so only listed peers are accepted.
kv_params_verdict check_kv_params(const std::optional<secret_key>& key, const kv_params_claim& c,
                                  const std::string& prompt_hash, const std::vector<std::string>& peers,
                                  int64_t now_unix_s);

} // namespace ordo
