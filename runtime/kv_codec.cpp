#include "runtime/kv_codec.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ordo {

size_t kv_chunk_object_bytes(const std::vector<kv_field>& fields, int32_t num_blocks) {
  if (num_blocks < 0) throw std::invalid_argument("kv chunk object: num_blocks " + std::to_string(num_blocks) + " < 0");
  size_t unit_bytes = 0;
  for (const auto& f : fields) unit_bytes += f.block_bytes();
  return unit_bytes * static_cast<size_t>(num_blocks);
}

size_t kv_chunk_offset(const std::vector<kv_field>& fields, int32_t num_blocks, size_t field_index, int32_t block) {
  if (field_index >= fields.size())
    throw std::out_of_range("kv chunk object: field " + std::to_string(field_index) + " of " +
                            std::to_string(fields.size()));
  if (block < 0 || block >= num_blocks)
    throw std::out_of_range("kv chunk object: block " + std::to_string(block) + " of " + std::to_string(num_blocks));
  size_t before = 0;
  for (size_t f = 0; f < field_index; ++f) before += fields[f].block_bytes();
  return static_cast<size_t>(num_blocks) * before + static_cast<size_t>(block) * fields[field_index].block_bytes();
}

unit_copy_fields::unit_copy_fields(const std::vector<kv_field>& fields, device& dev) : dev_(dev) {
  for (const auto& f : fields) {
    regions_.push_back(static_cast<uint8_t*>(f.region));
    block_bytes_.push_back(f.block_bytes());
    unit_bytes_ += f.block_bytes();
    max_block_bytes_ = std::max<uint64_t>(max_block_bytes_, f.block_bytes());
  }
  const size_t n = fields.size();
  device_arrays_ = dev_.alloc_device(n * (sizeof(uint64_t) + sizeof(uint8_t*)));
  device_block_bytes_ = static_cast<uint64_t*>(device_arrays_);
  device_regions_ = reinterpret_cast<uint8_t**>(device_block_bytes_ + n);
  if (n > 0) {
    dev_.copy_async(stream_kind::load, device_block_bytes_, block_bytes_.data(), n * sizeof(uint64_t));
    dev_.copy_async(stream_kind::load, device_regions_, regions_.data(), n * sizeof(uint8_t*));
  }
  dev_.synchronize();
}

unit_copy_fields::~unit_copy_fields() { dev_.free_device(device_arrays_); }

unit_copy_args chunk_copy_args(const unit_copy_fields& fields, const int32_t* unit_ids, int32_t num_units,
                               uint8_t* host, unit_copy_direction dir, bool segment_major) {
  if (num_units < 0) throw std::invalid_argument("chunk_copy_args: num_units " + std::to_string(num_units) + " < 0");
  if (num_units > 0 && unit_ids == nullptr) throw std::invalid_argument("chunk_copy_args: no unit ids");
  unit_copy_args a;
  a.regions = fields.device_regions();
  a.block_bytes = fields.device_block_bytes();
  a.unit_ids = unit_ids;
  a.host = host;
  a.num_fields = fields.num_fields();
  a.num_units = num_units;
  a.max_block_bytes = fields.max_block_bytes();
  a.unit_bytes = fields.unit_bytes();
  a.direction = dir;
  a.segment_major = segment_major;
  return a;
}

} // namespace ordo
