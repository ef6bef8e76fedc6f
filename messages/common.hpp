// Fields shared by every command between actors.
#pragma once

#include <cstdint>

namespace ordo {

// Every command carries (epoch, seq): `epoch` changes when a sender restarts its stream of
// commands, `seq` counts commands within an epoch from 1. Receivers check contiguity
// (runtime/sequence_check.hpp) and refuse a gap or a reordering.
struct command_header {
  uint64_t epoch = 0;
  uint64_t seq = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, command_header& x) {
  return f(x.epoch, x.seq);
}

inline bool operator==(const command_header& a, const command_header& b) {
  return a.epoch == b.epoch && a.seq == b.seq;
}

} // namespace ordo
