// Receivers of ordered commands check (epoch, seq) contiguity: within an epoch every command's
// seq is the previous one's + 1; a new (larger) epoch restarts at seq 1.
#pragma once

#include <cstdint>
#include <string>

namespace ordo {

class sequence_check {
public:
  // Returns an empty string when (epoch, seq) is the next command, else why it is not.
  // Only an accepted command advances the expectation.
  std::string accept(uint64_t epoch, uint64_t seq) {
    if (epoch < epoch_ || (epoch == epoch_ && seq != last_seq_ + 1) || (epoch > epoch_ && seq != 1))
      return "command (" + std::to_string(epoch) + ", " + std::to_string(seq) + ") out of order: expected (" +
             std::to_string(epoch_) + ", " + std::to_string(last_seq_ + 1) + ") or (>" +
             std::to_string(epoch_) + ", 1)";
    epoch_ = epoch;
    last_seq_ = seq;
    return {};
  }

  uint64_t epoch() const { return epoch_; }
  uint64_t last_seq() const { return last_seq_; }

private:
  uint64_t epoch_ = 0;
  uint64_t last_seq_ = 0;
};

// The sending side: stamps commands with the next (epoch, seq).
class sequence_stamp {
public:
  explicit sequence_stamp(uint64_t epoch = 1) : epoch_(epoch) {}
  uint64_t epoch() const { return epoch_; }
  uint64_t next() { return ++seq_; }

private:
  uint64_t epoch_;
  uint64_t seq_ = 0;
};

} // namespace ordo
