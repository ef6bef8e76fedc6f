// Converters between the message structs of messages/*.hpp and their Cap'n Proto mirror in
// messages/ordo.capnp, plus whole-message encode/decode (one flat-array message per value).
// Adding a field: append it to ordo.capnp, then to the struct's to_capnp/from_capnp pair in
// capnp_convert.cpp; tests/test_capnp_convert.cpp fills every inspected field and fails otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/common.hpp"
#include "messages/connector.hpp"
#include "messages/ordo.capnp.h"
#include "messages/pool.hpp"
#include "messages/request.hpp"
#include "messages/step.hpp"
#include "messages/store.hpp"

namespace ordo {

// Maps a message struct to its Cap'n Proto struct; `name` is used in error messages.
template <class T>
struct wire_type;

#define ORDO_WIRE_TYPE(cpp_type, capnp_type)                                                     \
  template <>                                                                                    \
  struct wire_type<cpp_type> {                                                                   \
    using type = wire::capnp_type;                                                               \
    static constexpr const char* name = #cpp_type;                                               \
  };                                                                                             \
  void to_capnp(const cpp_type& x, wire::capnp_type::Builder b);                                 \
  cpp_type from_capnp(wire::capnp_type::Reader r);

// common.hpp
ORDO_WIRE_TYPE(command_header, CommandHeader)
// request.hpp
ORDO_WIRE_TYPE(completion_request, CompletionRequest)
ORDO_WIRE_TYPE(completion_chunk, CompletionChunk)
ORDO_WIRE_TYPE(completion_result, CompletionResult)
ORDO_WIRE_TYPE(completion_failed, CompletionFailed)
ORDO_WIRE_TYPE(cancel_request, CancelRequest)
ORDO_WIRE_TYPE(evict_request, EvictRequest)
ORDO_WIRE_TYPE(evict_result, EvictResult)
ORDO_WIRE_TYPE(media_span, MediaSpan)
ORDO_WIRE_TYPE(stop_sequence, StopSequence)
// step.hpp
ORDO_WIRE_TYPE(scheduled_request, ScheduledRequest)
ORDO_WIRE_TYPE(step_plan, StepPlan)
ORDO_WIRE_TYPE(sampled_token, SampledToken)
ORDO_WIRE_TYPE(step_done, StepDone)
ORDO_WIRE_TYPE(state_image_copy, StateImageCopy)
ORDO_WIRE_TYPE(unit_transfer, UnitTransfer)
// pool.hpp
ORDO_WIRE_TYPE(block_commit, BlockCommit)
ORDO_WIRE_TYPE(block_grow, BlockGrow)
ORDO_WIRE_TYPE(pool_step, PoolStep)
ORDO_WIRE_TYPE(grow_result, GrowResult)
ORDO_WIRE_TYPE(pool_step_done, PoolStepDone)
ORDO_WIRE_TYPE(checkpoint_position, CheckpointPosition)
ORDO_WIRE_TYPE(reserved_image, ReservedImage)
ORDO_WIRE_TYPE(image_unpin, ImageUnpin)
// connector.hpp
ORDO_WIRE_TYPE(connector_lookup, ConnectorLookup)
ORDO_WIRE_TYPE(connector_lookup_done, ConnectorLookupDone)
ORDO_WIRE_TYPE(kv_object, KvObject)
ORDO_WIRE_TYPE(transfer_order, TransferOrder)
ORDO_WIRE_TYPE(transfer_result, TransferResult)
ORDO_WIRE_TYPE(connector_step, ConnectorStep)
ORDO_WIRE_TYPE(transfer_grant, TransferGrant)
ORDO_WIRE_TYPE(connector_step_done, ConnectorStepDone)
// store.hpp
ORDO_WIRE_TYPE(object_key, ObjectKey)
ORDO_WIRE_TYPE(store_contains, StoreContains)
ORDO_WIRE_TYPE(store_contains_done, StoreContainsDone)
ORDO_WIRE_TYPE(store_stats, StoreStats)
ORDO_WIRE_TYPE(object_ref, ObjectRef)
ORDO_WIRE_TYPE(store_grant, StoreGrant)
ORDO_WIRE_TYPE(store_step, StoreStep)
ORDO_WIRE_TYPE(store_step_done, StoreStepDone)
ORDO_WIRE_TYPE(store_corrupt, StoreCorrupt)

#undef ORDO_WIRE_TYPE

// `x` as one unpacked Cap'n Proto message in flat-array form (segment table + segments).
// Instantiated in capnp_convert.cpp for every type that has a wire_type.
template <class T>
std::vector<uint8_t> encode_message(const T& x);

// Inverse of encode_message. Throws std::runtime_error naming T when `bytes` is not a complete,
// well-formed message (bad length, truncated, trailing bytes, out-of-bounds pointers).
// Cap'n Proto carries no type tag: bytes of another message type decode without error.
template <class T>
T decode_message(const std::vector<uint8_t>& bytes);

} // namespace ordo
