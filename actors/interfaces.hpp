// Every actor interface of ordo, as caf::typed_actor aliases. One line per handler: who sends
// it and what it must come after. Message structs live in messages/, their type ids in
// messages/type_ids.hpp.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "messages/type_ids.hpp"

namespace ordo {

using block_pool_actor = caf::typed_actor<
  // scheduler, once per loop turn, after the previous pool_step's reply (seq contiguous).
  caf::replies_to<pool_step>::with<pool_step_done>>;

using store_actor = caf::typed_actor<
  // connector, any time: which of `keys` are committed.
  caf::replies_to<store_contains>::with<store_contains_done>,
  // connector, once per connector step (seq contiguous): commits, aborts, unpins, pins, reserves.
  caf::replies_to<store_step>::with<store_step_done>,
  // tests only (node::test_corrupt_store): flips a byte of every committed object of a kind.
  caf::replies_to<store_corrupt>::with<int32_t>>;

// The `ordo store` server process (actors/store_server.hpp), reached as a CAF remote actor.
using store_server_actor = caf::typed_actor<
  // a node's connector, first: opens a session for the sender (refused: ok = false, why).
  caf::replies_to<store_hello>::with<store_welcome>,
  // a session's connector, any time: which of `keys` are committed.
  caf::replies_to<store_contains>::with<store_contains_done>,
  // a session's connector, once per connector step (seq contiguous per session).
  caf::replies_to<store_step>::with<store_step_done>,
  // a session with store.transport = "tcp", after the pin that granted the object: its bytes.
  caf::replies_to<store_read>::with<store_read_done>,
  // a session with store.transport = "tcp", after the reserve and before the commit: its bytes.
  caf::replies_to<store_write>::with<store_write_done>>;

using connector_actor = caf::typed_actor<
  // scheduler, once per new request, before the request is admitted.
  caf::replies_to<connector_lookup>::with<connector_lookup_done>,
  // scheduler, in a loop turn with transfers, after pool_step_done and before the step_plan
  // (seq contiguous); answered after the store step it makes.
  caf::replies_to<connector_step>::with<connector_step_done>>;

using model_runner_actor = caf::typed_actor<
  // scheduler, after the previous step_plan's step_done (seq contiguous); answered when the
  // device has completed every operation of the step.
  caf::replies_to<step_plan>::with<step_done>,
  // the runner's own device callback, after the step's last operation completed.
  caf::reacts_to<step_done>>;

using scheduler_actor = caf::typed_actor<
  // frontend, any time; answered with completion_chunk* then completion_result or
  // completion_failed, sent to the requesting actor.
  caf::reacts_to<completion_request>,
  // frontend, when the client of a request went away; the request is in no plan after the one
  // in flight and is answered with nothing.
  caf::reacts_to<cancel_request>,
  // frontend, any time; answered with evict_result after the pool step that evicted.
  caf::reacts_to<evict_request>>;

// Whoever sends completion_request / evict_request to the scheduler (the frontend, or a test).
using completion_client_actor = caf::typed_actor<
  // scheduler, in sampling order, before the request's completion_result.
  caf::reacts_to<completion_chunk>,
  // scheduler, once per request, after its last completion_chunk.
  caf::reacts_to<completion_result>,
  // scheduler, once per request it could not serve.
  caf::reacts_to<completion_failed>,
  // scheduler, after the pool step that applied the evict_request.
  caf::reacts_to<evict_result>>;

using frontend_actor = completion_client_actor::extend<
  // HTTP thread, for each parsed completion; forwarded to the scheduler.
  caf::reacts_to<completion_request>,
  // HTTP thread, when a client hangs up before its answer; forwarded to the scheduler.
  caf::reacts_to<cancel_request>,
  // HTTP thread, for each POST /admin/evict.
  caf::reacts_to<evict_request>>;

} // namespace ordo
