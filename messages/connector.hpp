// The connector protocol: how many prefix tokens the offload tiers hold for a request.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ordo {

// scheduler → connector: which of these full-block hashes can a tier outside HBM provide?
struct connector_lookup {
  uint64_t request_id = 0;
  std::vector<uint64_t> hashes;
  int32_t num_prompt_tokens = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, connector_lookup& x) {
  return f(x.request_id, x.hashes, x.num_prompt_tokens);
}

// connector → scheduler: prefix tokens each tier holds (0 for the `none` connector).
struct connector_lookup_done {
  uint64_t request_id = 0;
  int32_t cpu_tokens = 0;
  int32_t store_tokens = 0;
  std::string connector; // name of the connector that answered
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, connector_lookup_done& x) {
  return f(x.request_id, x.cpu_tokens, x.store_tokens, x.connector);
}

} // namespace ordo
