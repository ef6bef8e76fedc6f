#include "kernels/cpu/ple.hpp"

#include "kernels/cpu/hash.hpp"
#include "kernels/cpu/paging.hpp"

namespace ordo::cpu {

void ple_ngram(const ple_ngram_args& a) {
  const int32_t keep = a.n - 1;
  for (int32_t r = 0; r < a.batch.num_reqs; ++r) {
    int32_t* window = reinterpret_cast<int32_t*>(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots) + a.state_offset);
    for (int32_t row = a.batch.req_token_start[r]; row < a.batch.req_token_start[r + 1]; ++row) {
      const int32_t cur = a.batch.token_ids[row] + 1;
      uint64_t h = a.hash_seed;
      for (int32_t j = 0; j < keep; ++j) h = mix64(h ^ static_cast<uint32_t>(window[j]));
      h = mix64(h ^ static_cast<uint32_t>(cur));
      a.buckets[row] = static_cast<int32_t>(h % static_cast<uint64_t>(a.num_buckets));
      for (int32_t j = 0; j + 1 < keep; ++j) window[j] = window[j + 1];
      if (keep > 0) window[keep - 1] = cur;
    }
  }
}

} // namespace ordo::cpu
