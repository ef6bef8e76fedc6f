#include "runtime/pd_params.hpp"

#include <algorithm>

namespace ordo {

namespace {

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

const std::string rule_tail =
    " A decode node pulls only with the kv_transfer_params a prefill node of this deployment answered "
    "(signed with its secret, for this prompt), or from a peer listed in pd.peers; send the prefill node's "
    "kv_transfer_params unchanged, or none.";

} // namespace

std::string prompt_hash(const completion_request& r) {
  std::string bytes = "ordo-prompt-v1";
  put_u64(bytes, r.cache_salt.size());
  bytes += r.cache_salt;
  put_u64(bytes, r.media.size());
  for (const auto& m : r.media) {
    put_u64(bytes, static_cast<uint64_t>(m.offset));
    put_u64(bytes, static_cast<uint64_t>(m.length));
    put_u64(bytes, m.hash);
  }
  put_u64(bytes, r.prompt.size());
  for (int32_t t : r.prompt)
    for (int i = 0; i < 4; ++i)
      bytes.push_back(static_cast<char>((static_cast<uint32_t>(t) >> (8 * i)) & 0xff));
  return sha256_hex(bytes);
}

std::string kv_params_message(const kv_params_claim& c, const std::string& hash) {
  return "ordo-kv-transfer-v1\n" + c.engine_id + "\n" + c.endpoint() + "\n" + c.transfer_id + "\n" + hash + "\n" +
         std::to_string(c.expires_at);
}

std::string sign_kv_params(const secret_key& key, const kv_params_claim& c, const std::string& hash) {
  return hmac_hex(key, kv_params_message(c, hash));
}

kv_params_verdict check_kv_params(const std::optional<secret_key>& key, const kv_params_claim& c,
                                  const std::string& hash, const std::vector<std::string>& peers,
                                  int64_t now) {
  kv_params_verdict v;
  if (!c.names_peer())
    return v;
  const std::string who = "kv_transfer_params names the prefill node " + c.endpoint();
  if (!c.signature.empty()) {
    if (!key) {
      v.refusal = who + " with a signature, but this node holds no deployment secret to verify it." + rule_tail;
      return v;
    }
    if (!hmac_matches(*key, kv_params_message(c, hash), c.signature)) {
      v.refusal = who + ", but their signature does not verify: they were not signed by a node holding this "
                        "deployment's secret (security.secret_file), were changed, or were signed for another prompt." +
                  rule_tail;
      return v;
    }
    if (c.expires_at < now) {
      v.refusal = who + ", but they expired " + std::to_string(now - c.expires_at) +
                  " s ago (expires_at); prefill again." + rule_tail;
      return v;
    }
    if (c.expires_at > now + kv_params_max_ttl_s) {
      v.refusal = who + ", but they claim to stay valid for " + std::to_string(c.expires_at - now) +
                  " s, more than the " + std::to_string(kv_params_max_ttl_s) + " s allowed." + rule_tail;
      return v;
    }
    v.trust = peer_trust::signed_params;
    return v;
  }
  if (std::find(peers.begin(), peers.end(), c.endpoint()) != peers.end()) {
    v.trust = peer_trust::listed;
    return v;
  }
  v.refusal = who + ", but they carry no signature and " + c.endpoint() + " is not in pd.peers." + rule_tail;
  return v;
}

} // namespace ordo
