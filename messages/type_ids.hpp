// The one CAF type-id block of ordo: every message struct an actor sends.
#pragma once

#include <caf/type_id.hpp>

#include "messages/common.hpp"
#include "messages/connector.hpp"
#include "messages/pool.hpp"
#include "messages/request.hpp"
#include "messages/step.hpp"
#include "messages/store.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(ordo, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(ordo, (ordo::command_header))
  CAF_ADD_TYPE_ID(ordo, (ordo::completion_request))
  CAF_ADD_TYPE_ID(ordo, (ordo::completion_chunk))
  CAF_ADD_TYPE_ID(ordo, (ordo::completion_result))
  CAF_ADD_TYPE_ID(ordo, (ordo::completion_failed))
  CAF_ADD_TYPE_ID(ordo, (ordo::evict_request))
  CAF_ADD_TYPE_ID(ordo, (ordo::evict_result))
  CAF_ADD_TYPE_ID(ordo, (ordo::scheduled_request))
  CAF_ADD_TYPE_ID(ordo, (ordo::step_plan))
  CAF_ADD_TYPE_ID(ordo, (ordo::sampled_token))
  CAF_ADD_TYPE_ID(ordo, (ordo::step_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::block_commit))
  CAF_ADD_TYPE_ID(ordo, (ordo::block_grow))
  CAF_ADD_TYPE_ID(ordo, (ordo::pool_step))
  CAF_ADD_TYPE_ID(ordo, (ordo::grow_result))
  CAF_ADD_TYPE_ID(ordo, (ordo::pool_step_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::connector_lookup))
  CAF_ADD_TYPE_ID(ordo, (ordo::connector_lookup_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::object_key))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_contains))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_contains_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_stats))
  CAF_ADD_TYPE_ID(ordo, (ordo::state_image_copy))
  CAF_ADD_TYPE_ID(ordo, (ordo::checkpoint_position))
  CAF_ADD_TYPE_ID(ordo, (ordo::reserved_image))
  CAF_ADD_TYPE_ID(ordo, (ordo::image_unpin))
  CAF_ADD_TYPE_ID(ordo, (ordo::media_span))
  CAF_ADD_TYPE_ID(ordo, (ordo::object_ref))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_grant))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_step))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_step_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_corrupt))
  CAF_ADD_TYPE_ID(ordo, (ordo::kv_object))
  CAF_ADD_TYPE_ID(ordo, (ordo::transfer_order))
  CAF_ADD_TYPE_ID(ordo, (ordo::transfer_result))
  CAF_ADD_TYPE_ID(ordo, (ordo::connector_step))
  CAF_ADD_TYPE_ID(ordo, (ordo::transfer_grant))
  CAF_ADD_TYPE_ID(ordo, (ordo::connector_step_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::unit_transfer))
  CAF_ADD_TYPE_ID(ordo, (ordo::cancel_request))
  CAF_ADD_TYPE_ID(ordo, (ordo::stop_sequence))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_hello))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_welcome))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_read))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_read_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_write))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_write_done))
  CAF_ADD_TYPE_ID(ordo, (ordo::lease_order))
  CAF_ADD_TYPE_ID(ordo, (ordo::lease_grant))
  CAF_ADD_TYPE_ID(ordo, (ordo::store_lease))
  // The node's store client (actors/store_client.hpp): connect as this engine id; try again.
  CAF_ADD_ATOM(ordo, ordo, store_connect_atom, "sconnect")
  CAF_ADD_ATOM(ordo, ordo, store_retry_atom, "sretry")
  // A store server's own timer: the lease (namespace, transfer id, generation) ran out.
  CAF_ADD_ATOM(ordo, ordo, lease_expire_atom, "lexpire")
  // A P/D peer's store client's own timer: 0 = a waiting lookup's deadline, 1 = the idle check.
  CAF_ADD_ATOM(ordo, ordo, store_tick_atom, "stick")

CAF_END_TYPE_ID_BLOCK(ordo)
