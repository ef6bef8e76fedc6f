// block_pool actor: owns the block accounting core (runtime/block_accounting.hpp).
//   ready ──pool_step (seq = last + 1)──► apply ──► pool_step_done ──► ready
// NOTE(contiguity): a pool_step out of (epoch, seq) order is refused with an error and changes
// nothing.
#pragma once

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"

namespace ordo {

block_pool_actor spawn_block_pool(caf::actor_system& sys, int32_t num_blocks, int32_t block_size,
                                  trace_tap tap = {});

} // namespace ordo
