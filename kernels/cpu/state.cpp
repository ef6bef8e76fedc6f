#include "kernels/cpu/state.hpp"

#include <cstring>

#include "kernels/cpu/paging.hpp"

namespace ordo::cpu {

void state_reset(const state_reset_args& a) {
  for (int32_t r = 0; r < a.batch.num_reqs; ++r)
    if (a.batch.req_reset_state[r] == 1)
      std::memset(state_slot(a.batch, r, a.state_base, a.slot_bytes, a.num_slots), 0, a.slot_bytes);
}

} // namespace ordo::cpu
