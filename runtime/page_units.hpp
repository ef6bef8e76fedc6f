// Page units as state-image storage (DESIGN §4). A page unit is one block id across every
// region of the KV arena: for block b, the bytes [b·block_bytes, (b+1)·block_bytes) of each
// field, in the arena's field order (layer-major). An image of `image_bytes` is laid over
// ceil(image_bytes / unit_bytes) units in order: unit 0's fields, then unit 1's, and so on.
// Every operation is enqueued on a device stream as copies or fills, so it is ordered with the
// forward by the stream itself and by the runner's events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_layout.hpp"
#include "runtime/device.hpp"

namespace ordo {

class page_units {
public:
  page_units(std::vector<kv_field> fields, state_layout state);

  size_t unit_bytes() const { return unit_bytes_; }
  int32_t units_per_image() const;

  // Fills block `unit` of every field with the field's declared fill byte (fp8 fields too:
  // the fill is written through a byte view).
  void enqueue_clear(device& dev, stream_kind stream, int32_t unit) const;
  // Slot → units (a checkpoint copy).
  void enqueue_pack(device& dev, stream_kind stream, int32_t slot, const std::vector<int32_t>& units) const;
  // Units → slot (a restore).
  void enqueue_unpack(device& dev, stream_kind stream, const std::vector<int32_t>& units, int32_t slot) const;

private:
  template <class Fn>
  void for_each_piece(const std::vector<int32_t>& units, Fn&& fn) const;

  std::vector<kv_field> fields_;
  state_layout state_;
  size_t unit_bytes_ = 0;
};

} // namespace ordo
