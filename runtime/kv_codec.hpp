// The KV chunk object's byte order (DESIGN §4): segment-major, then block-major raw bytes. For
// each page field (segment) of the arena, in arena order (layer-major, then k, v, k_scale,
// v_scale, index_raw, index_compressed as kernels/kv_layout.hpp publishes them), its blocks in
// object order, each block the field's whole block_bytes(). So with N blocks in the object,
// (field f, object block i) starts at N·sum(block_bytes of fields before f) + i·block_bytes(f).
// Nothing else is in the object: no header, no padding; scale planes are fields like any other.
// The unit_copy kernel writes and reads this order directly (unit_copy_args::segment_major).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernel_args.hpp"
#include "kernels/kv_layout.hpp"
#include "runtime/device.hpp"

namespace ordo {

// Bytes of a chunk object of `num_blocks` blocks: num_blocks × the page unit's bytes.
// Throws std::invalid_argument when num_blocks < 0.
size_t kv_chunk_object_bytes(const std::vector<kv_field>& fields, int32_t num_blocks);

// Offset of (fields[field_index], object block `block`) in a chunk object of `num_blocks` blocks.
// Throws std::out_of_range unless field_index < fields.size() and 0 <= block < num_blocks.
size_t kv_chunk_offset(const std::vector<kv_field>& fields, int32_t num_blocks, size_t field_index, int32_t block);

// The arena's fields as unit_copy reads them: per field in arena order, its region and its
// block_bytes. A GPU kernel dereferences both arrays, so besides the host copies this holds them
// in device memory of `dev` (on the CPU device that is host memory too).
// Built once per model at startup: the constructor uploads and waits for the device
// (device::synchronize). Must outlive every launch whose args it filled; not copyable.
class unit_copy_fields {
public:
  unit_copy_fields(const std::vector<kv_field>& fields, device& dev);
  ~unit_copy_fields();
  unit_copy_fields(const unit_copy_fields&) = delete;
  unit_copy_fields& operator=(const unit_copy_fields&) = delete;

  int32_t num_fields() const { return static_cast<int32_t>(block_bytes_.size()); }
  uint64_t unit_bytes() const { return unit_bytes_; }
  uint64_t max_block_bytes() const { return max_block_bytes_; }
  // Host copies, in arena order.
  const std::vector<uint8_t*>& regions() const { return regions_; }
  const std::vector<uint64_t>& block_bytes() const { return block_bytes_; }
  // The device copies that unit_copy_args point at.
  uint8_t* const* device_regions() const { return device_regions_; }
  const uint64_t* device_block_bytes() const { return device_block_bytes_; }

private:
  device& dev_;
  std::vector<uint8_t*> regions_;
  std::vector<uint64_t> block_bytes_;
  uint64_t unit_bytes_ = 0, max_block_bytes_ = 0;
  void* device_arrays_ = nullptr; // block_bytes then regions, one allocation
  uint64_t* device_block_bytes_ = nullptr;
  uint8_t** device_regions_ = nullptr;
};

// Args for kernel_table::unit_copy moving `num_units` blocks between the arena and `host`:
// entry i of unit_ids is the arena block of object block i (negative: skip it, its host bytes
// and arena block stay as they are). With segment_major the host buffer is a chunk object in the
// order above; without, it is unit-major (runtime/page_units.hpp's order). Either way it is
// kv_chunk_object_bytes(fields, num_units) bytes.
// What the kernel reads when it runs on the stream, and so must stay valid and unchanged until
// the launch completes:
// - unit_ids: device-readable. On a GPU device that is device memory (dev.alloc_device, filled by
//   copy_async on the launch's stream before the launch, as `ordo bench copy` does; the copy's
//   source must live until the copy ran) or mapped pinned memory (dev.alloc_host_pinned). Plain
//   host memory (a std::vector) works on the CPU device only.
// - host: dev.alloc_host_pinned memory (the GPU kernel addresses it through its mapping).
// - `fields` and the arena it describes.
// Throws std::invalid_argument when num_units < 0 or unit_ids is null while num_units > 0.
unit_copy_args chunk_copy_args(const unit_copy_fields& fields, const int32_t* unit_ids, int32_t num_units,
                               uint8_t* host, unit_copy_direction dir, bool segment_major);

} // namespace ordo
