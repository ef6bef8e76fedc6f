// scheduler actor: a shell over its core (runtime/scheduler_core.hpp). Every message it receives
// goes through its door into scheduler_core::apply; what comes back is sent as it is.
//   idle ──work──► pool_step sent ──pool_step_done──► step_plan sent ──step_done──► idle
//                        └──(nothing to run)──► idle
// NOTE(one-in-flight): at most one pool_step and one step_plan are outstanding, so every pool
// change (release, commit, reuse) happens after the forward that wrote those blocks completed.
// NOTE(replies): completion_chunk/result/failed and evict_result go to the actor that sent the
// request.
#pragma once

#include <functional>

#include <caf/actor_system.hpp>

#include "actors/door.hpp"
#include "actors/interfaces.hpp"
#include "runtime/scheduling.hpp"

namespace ordo {

struct scheduler_handles {
  block_pool_actor pool;
  model_runner_actor runner;
  connector_actor connector;
};

// Called on the scheduler's thread after every loop turn with the core's counters (metrics).
using scheduler_observer = std::function<void(const scheduler_stats&, const completion_result*)>;

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_options& options, scheduler_handles handles,
                                scheduler_observer observer = {}, trace_tap tap = {});

} // namespace ordo
