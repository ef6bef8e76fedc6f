// Fields shared by every command between actors.
// Each struct's fields are declared once, by name, in its ORDO_FIELDS line (messages/fields.hpp),
// which generates CAF's inspect and the named visitor the Cap'n Proto converter uses. Adding a
// field: the member, its entry in the ORDO_FIELDS line, and the field appended to the struct in
// messages/ordo.capnp (camelCase of the C++ name).
#pragma once

#include <cstdint>

#include "messages/fields.hpp"

namespace ordo {

// Every command carries (epoch, seq): `epoch` changes when a sender restarts its stream of
// commands, `seq` counts commands within an epoch from 1. Receivers check contiguity
// (runtime/sequence_check.hpp) and refuse a gap or a reordering.
struct command_header {
  uint64_t epoch = 0;
  uint64_t seq = 0;
};

ORDO_FIELDS(command_header, epoch, seq)

inline bool operator==(const command_header& a, const command_header& b) {
  return a.epoch == b.epoch && a.seq == b.seq;
}

} // namespace ordo
