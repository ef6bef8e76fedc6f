#include <catch.hpp>

#include <cstring>
#include <vector>

#include "runtime/page_units.hpp"

using namespace ordo;

namespace {

struct fixture {
  std::unique_ptr<device> dev = make_cpu_device({/*chaos_seed=*/11, /*chaos_max_delay_us=*/200});
  std::vector<kv_field> fields;
  state_layout state;
  std::vector<void*> owned;

  fixture() {
    // Two fields of 8 blocks: 24 and 40 bytes per block (unit = 64 bytes); an fp8 field fills 0x7f.
    for (auto [name, bytes, fill] : {std::tuple{"k", 24, 0}, std::tuple{"k_scale", 40, 0x7f}}) {
      kv_field f;
      f.name = name;
      f.dtype = fill ? elem_dtype::fp8_e4m3 : elem_dtype::fp32;
      f.row_bytes = static_cast<size_t>(bytes);
      f.rows_per_block = 1;
      f.fill_byte = static_cast<uint8_t>(fill);
      f.region = dev->alloc_device(8 * f.block_bytes());
      owned.push_back(f.region);
      fields.push_back(f);
    }
    state.num_slots = 2;
    state.slot_bytes = 160;
    state.image_bytes = 150; // three units: 64 + 64 + 22
    state.base = dev->alloc_device(state.num_slots * state.slot_bytes);
    owned.push_back(state.base);
  }
  ~fixture() {
    dev->synchronize();
    for (auto* p : owned)
      dev->free_device(p);
  }
  uint8_t* slot(int s) { return static_cast<uint8_t*>(state.base) + s * state.slot_bytes; }
};

} // namespace

TEST_CASE("page units: an image packed into units unpacks byte for byte into another slot") {
  fixture f;
  page_units units(f.fields, f.state);
  CHECK(units.unit_bytes() == 64);
  REQUIRE(units.units_per_image() == 3);
  for (size_t i = 0; i < f.state.image_bytes; ++i)
    f.slot(0)[i] = static_cast<uint8_t>(i * 7 + 1);
  std::vector<int32_t> ids = {5, 2, 7};
  units.enqueue_pack(*f.dev, stream_kind::compute, 0, ids);
  units.enqueue_unpack(*f.dev, stream_kind::compute, ids, 1);
  f.dev->synchronize();
  CHECK(std::memcmp(f.slot(0), f.slot(1), f.state.image_bytes) == 0);
  // The image's first bytes sit in unit 5 of the first field, the next in unit 5 of the second.
  CHECK(static_cast<uint8_t*>(f.fields[0].region)[5 * 24] == f.slot(0)[0]);
  CHECK(static_cast<uint8_t*>(f.fields[1].region)[5 * 40] == f.slot(0)[24]);
  CHECK_THROWS_AS(units.enqueue_pack(*f.dev, stream_kind::compute, 0, {5, 2}), std::invalid_argument);
}

TEST_CASE("page units: a clear fills one block of every field with its declared fill, nothing else") {
  fixture f;
  page_units units(f.fields, f.state);
  for (auto& field : f.fields)
    std::memset(field.region, 0xaa, 8 * field.block_bytes());
  units.enqueue_clear(*f.dev, stream_kind::compute, 3);
  f.dev->synchronize();
  for (auto& field : f.fields) {
    auto* r = static_cast<uint8_t*>(field.region);
    for (size_t b = 0; b < 8; ++b)
      for (size_t i = 0; i < field.block_bytes(); ++i) {
        INFO(field.name << " block " << b << " byte " << i);
        REQUIRE(r[b * field.block_bytes() + i] == (b == 3 ? field.fill_byte : 0xaa));
      }
  }
}
