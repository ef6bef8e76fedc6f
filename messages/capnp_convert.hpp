// Converters between the message structs of messages/*.hpp and their Cap'n Proto mirror in
// messages/ordo.capnp, plus whole-message encode/decode (one flat-array message per value).
// One generic converter (capnp_convert.cpp) walks a struct's ORDO_FIELDS declaration
// (messages/fields.hpp) and matches each field to the capnp field of the same name (camelCase
// of the C++ name, or the wire name the declaration gives), by name, never by ordinal.
// Adding a field, in one place: the struct member and its entry in the struct's ORDO_FIELDS line,
// plus the field appended to the struct in ordo.capnp. No converter code changes; a C++ field
// with no capnp field of its name throws std::logic_error (naming both) at first use, and
// tests/test_capnp_convert.cpp round-trips every field and compares field counts.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/common.hpp"
#include "messages/connector.hpp"
#include "messages/fields.hpp"
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

// Every message struct with a Cap'n Proto mirror, as X(cpp_type, capnp_type).
#define ORDO_FOR_EACH_WIRE_TYPE(X)                                                               \
  X(command_header, CommandHeader)                                                               \
  X(completion_request, CompletionRequest)                                                       \
  X(completion_chunk, CompletionChunk)                                                           \
  X(completion_result, CompletionResult)                                                         \
  X(completion_failed, CompletionFailed)                                                         \
  X(cancel_request, CancelRequest)                                                               \
  X(evict_request, EvictRequest)                                                                 \
  X(evict_result, EvictResult)                                                                   \
  X(media_span, MediaSpan)                                                                       \
  X(stop_sequence, StopSequence)                                                                 \
  X(scheduled_request, ScheduledRequest)                                                         \
  X(step_plan, StepPlan)                                                                         \
  X(sampled_token, SampledToken)                                                                 \
  X(step_done, StepDone)                                                                         \
  X(state_image_copy, StateImageCopy)                                                            \
  X(unit_transfer, UnitTransfer)                                                                 \
  X(block_commit, BlockCommit)                                                                   \
  X(block_grow, BlockGrow)                                                                       \
  X(pool_step, PoolStep)                                                                         \
  X(grow_result, GrowResult)                                                                     \
  X(pool_step_done, PoolStepDone)                                                                \
  X(checkpoint_position, CheckpointPosition)                                                     \
  X(reserved_image, ReservedImage)                                                               \
  X(image_unpin, ImageUnpin)                                                                     \
  X(connector_lookup, ConnectorLookup)                                                           \
  X(connector_lookup_done, ConnectorLookupDone)                                                  \
  X(kv_object, KvObject)                                                                         \
  X(transfer_order, TransferOrder)                                                               \
  X(transfer_result, TransferResult)                                                             \
  X(connector_step, ConnectorStep)                                                               \
  X(transfer_grant, TransferGrant)                                                               \
  X(connector_step_done, ConnectorStepDone)                                                      \
  X(object_key, ObjectKey)                                                                       \
  X(store_contains, StoreContains)                                                               \
  X(store_contains_done, StoreContainsDone)                                                      \
  X(store_stats, StoreStats)                                                                     \
  X(object_ref, ObjectRef)                                                                       \
  X(store_grant, StoreGrant)                                                                     \
  X(store_step, StoreStep)                                                                       \
  X(store_step_done, StoreStepDone)                                                              \
  X(store_corrupt, StoreCorrupt)                                                                 \
  X(store_hello, StoreHello)                                                                     \
  X(store_welcome, StoreWelcome)                                                                 \
  X(store_read, StoreRead)                                                                       \
  X(store_read_done, StoreReadDone)                                                              \
  X(store_write, StoreWrite)                                                                     \
  X(store_write_done, StoreWriteDone)                                                             \
  X(lease_order, LeaseOrder)                                                                     \
  X(lease_grant, LeaseGrant)                                                                     \
  X(store_lease, StoreLease)

ORDO_FOR_EACH_WIRE_TYPE(ORDO_WIRE_TYPE)

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
