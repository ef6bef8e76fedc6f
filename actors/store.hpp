// store actor: the in-process host-memory tier, a thin shell over runtime/host_store's apply().
// The node owns the arena (pinned host memory of the device, so the runner's gathers and
// scatters reach the objects directly: the shared-memory data path) and passes it here; an
// empty arena stores nothing (connector `none`).
//   ready ──store_contains──► present flags
//   ready ──store_step (seq checked)──► apply: commits, aborts, unpins, pins, reserves ──► store_step_done
// NOTE(no-log-core): the core returns orders that named nothing; this shell logs them.
#pragma once

#include <cstddef>
#include <cstdint>

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"

namespace ordo {

store_actor spawn_store(caf::actor_system& sys, uint8_t* arena, size_t capacity_bytes, trace_tap tap = {});

} // namespace ordo
