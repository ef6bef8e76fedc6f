#include "runtime/page_units.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ordo {

page_units::page_units(std::vector<kv_field> fields, state_layout state)
    : fields_(std::move(fields)), state_(std::move(state)) {
  for (const auto& f : fields_)
    unit_bytes_ += f.block_bytes();
}

int32_t page_units::units_per_image() const {
  if (unit_bytes_ == 0 || state_.image_bytes == 0)
    return 0;
  return static_cast<int32_t>((state_.image_bytes + unit_bytes_ - 1) / unit_bytes_);
}

// Calls fn(unit_ptr, image_offset, bytes) for each contiguous piece of the image.
template <class Fn>
void page_units::for_each_piece(const std::vector<int32_t>& units, Fn&& fn) const {
  if (static_cast<int32_t>(units.size()) < units_per_image())
    throw std::invalid_argument("a state image needs " + std::to_string(units_per_image()) + " units, got " +
                                std::to_string(units.size()));
  size_t offset = 0;
  for (auto unit : units) {
    for (const auto& f : fields_) {
      if (offset >= state_.image_bytes)
        return;
      size_t bytes = std::min(f.block_bytes(), state_.image_bytes - offset);
      auto* ptr = static_cast<uint8_t*>(f.region) + static_cast<size_t>(unit) * f.block_bytes();
      fn(ptr, offset, bytes);
      offset += bytes;
    }
  }
}

void page_units::enqueue_clear(device& dev, stream_kind stream, int32_t unit) const {
  for (const auto& f : fields_)
    dev.fill_async(stream, static_cast<uint8_t*>(f.region) + static_cast<size_t>(unit) * f.block_bytes(),
                   f.fill_byte, f.block_bytes());
}

void page_units::enqueue_pack(device& dev, stream_kind stream, int32_t slot, const std::vector<int32_t>& units) const {
  auto* base = static_cast<uint8_t*>(state_.base) + static_cast<size_t>(slot) * state_.slot_bytes;
  for_each_piece(units, [&](uint8_t* unit_ptr, size_t offset, size_t bytes) {
    dev.copy_async(stream, unit_ptr, base + offset, bytes);
  });
}

void page_units::enqueue_unpack(device& dev, stream_kind stream, const std::vector<int32_t>& units,
                                int32_t slot) const {
  auto* base = static_cast<uint8_t*>(state_.base) + static_cast<size_t>(slot) * state_.slot_bytes;
  for_each_piece(units, [&](uint8_t* unit_ptr, size_t offset, size_t bytes) {
    dev.copy_async(stream, base + offset, unit_ptr, bytes);
  });
}

} // namespace ordo
