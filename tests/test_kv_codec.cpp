#include <catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernel_table.hpp"
#include "runtime/kv_codec.hpp"
#include "runtime/model.hpp"

using namespace ordo;

namespace {

constexpr int32_t arena_blocks = 16;

// A tiny model on the CPU device with its arena filled with seeded bytes, and a copy of them.
struct built {
  std::unique_ptr<device> dev = make_cpu_device({/*chaos_seed=*/17, /*chaos_max_delay_us=*/200});
  std::unique_ptr<model> m;
  std::unique_ptr<kernel_table> table;
  std::vector<std::vector<uint8_t>> original; // per field, the whole region

  built(model_preset preset, kv_dtype kv) {
    model_options o;
    o.preset = preset;
    o.kv = kv;
    o.block_size = 16;
    o.num_blocks = arena_blocks;
    o.max_batch_tokens = 32;
    o.max_state_slots = 2;
    m = std::make_unique<model>(o, *dev);
    table = make_kernel_table(*dev);
    std::mt19937 gen(1000 + 10 * static_cast<int>(preset) + static_cast<int>(kv));
    for (const kv_field& f : fields()) {
      original.emplace_back(f.block_bytes() * arena_blocks);
      for (auto& b : original.back()) b = static_cast<uint8_t>(gen());
      std::memcpy(f.region, original.back().data(), original.back().size());
    }
  }
  const std::vector<kv_field>& fields() const { return m->kv_fields(); }
  const uint8_t* region(size_t f) const { return static_cast<const uint8_t*>(fields()[f].region); }
};

// The object order written out from kv_field alone (not through kv_codec): field f's block i
// starts at n·(block bytes of the fields before f) + i·block_bytes(f).
size_t object_offset(const std::vector<kv_field>& fields, int32_t n, size_t f, int32_t i) {
  size_t before = 0;
  for (size_t g = 0; g < f; ++g) before += fields[g].row_bytes * static_cast<size_t>(fields[g].rows_per_block);
  return static_cast<size_t>(n) * before + static_cast<size_t>(i) * fields[f].row_bytes * fields[f].rows_per_block;
}

size_t unit_bytes_of(const std::vector<kv_field>& fields) {
  size_t total = 0;
  for (const auto& f : fields) total += f.row_bytes * static_cast<size_t>(f.rows_per_block);
  return total;
}

// "" when `got` (bytes bytes) equals `want`, else where the first difference is.
std::string diff(const uint8_t* got, const uint8_t* want, size_t bytes, const std::string& what) {
  for (size_t k = 0; k < bytes; ++k)
    if (got[k] != want[k]) {
      std::ostringstream s;
      s << what << " byte " << k << ": got " << int(got[k]) << ", want " << int(want[k]);
      return s.str();
    }
  return "";
}

// Gathers or scatters `ids` through the kernel table (on the save / load stream), then waits.
void copy(built& b, const unit_copy_fields& ucf, const std::vector<int32_t>& ids, uint8_t* host,
          unit_copy_direction dir, bool segment_major) {
  const stream_kind s = dir == unit_copy_direction::gather ? stream_kind::save : stream_kind::load;
  b.table->unit_copy(s, chunk_copy_args(ucf, ids.data(), static_cast<int32_t>(ids.size()), host, dir, segment_major));
  b.dev->synchronize();
}

const model_preset presets[] = {model_preset::dense, model_preset::gdn_hybrid, model_preset::qsa_gdn_ple};
const kv_dtype dtypes[] = {kv_dtype::fp32, kv_dtype::fp8};

size_t count_fields(const std::vector<kv_field>& fields, const std::string& name) {
  size_t n = 0;
  for (const auto& f : fields) n += f.name == name;
  return n;
}

} // namespace

TEST_CASE("kv codec: object size and offsets follow the documented order") {
  for (auto preset : presets)
    for (auto kv : dtypes) {
      built b(preset, kv);
      const auto& fields = b.fields();
      INFO(to_string(preset) << " kv " << to_string(kv) << ", " << fields.size() << " fields");
      const int32_t n = 5;
      CHECK(kv_chunk_object_bytes(fields, n) == n * unit_bytes_of(fields));
      // The offsets tile the object: every byte belongs to exactly one (field, block).
      std::vector<int> covered(kv_chunk_object_bytes(fields, n), 0);
      for (size_t f = 0; f < fields.size(); ++f)
        for (int32_t i = 0; i < n; ++i) {
          const size_t at = kv_chunk_offset(fields, n, f, i);
          REQUIRE(at == object_offset(fields, n, f, i));
          for (size_t k = 0; k < fields[f].block_bytes(); ++k) ++covered.at(at + k);
        }
      CHECK(std::count(covered.begin(), covered.end(), 1) == static_cast<long>(covered.size()));
      CHECK_THROWS_AS(kv_chunk_offset(fields, n, fields.size(), 0), std::out_of_range);
      CHECK_THROWS_AS(kv_chunk_offset(fields, n, 0, n), std::out_of_range);
      CHECK_THROWS_AS(kv_chunk_offset(fields, n, 0, -1), std::out_of_range);
      CHECK_THROWS_AS(kv_chunk_object_bytes(fields, -1), std::invalid_argument);
    }
}

TEST_CASE("kv codec: a chunk object round-trips every byte of every field, scale planes included") {
  for (auto preset : presets)
    for (auto kv : dtypes) {
      built b(preset, kv);
      const auto& fields = b.fields();
      INFO(to_string(preset) << " kv " << to_string(kv) << ", " << fields.size() << " fields");
      // fp8 keeps one fp32 scale per (token, head) in k_scale / v_scale page fields; fp32 has none.
      const size_t attention_layers = count_fields(fields, "k");
      REQUIRE(attention_layers > 0);
      CHECK(count_fields(fields, "k_scale") == (kv == kv_dtype::fp8 ? attention_layers : 0));
      CHECK(count_fields(fields, "v_scale") == (kv == kv_dtype::fp8 ? attention_layers : 0));
      if (preset == model_preset::qsa_gdn_ple) CHECK(count_fields(fields, "index_compressed") == attention_layers);

      unit_copy_fields ucf(fields, *b.dev);
      const std::vector<int32_t> src = {9, 2, 14, 5, 0}, dst = {3, 7, 11, 1, 15};
      const int32_t n = static_cast<int32_t>(src.size());
      const size_t object_bytes = kv_chunk_object_bytes(fields, n);
      auto* object = static_cast<uint8_t*>(b.dev->alloc_host_pinned(object_bytes));
      std::memset(object, 0xee, object_bytes);

      copy(b, ucf, src, object, unit_copy_direction::gather, /*segment_major=*/true);
      for (size_t f = 0; f < fields.size(); ++f)
        for (int32_t i = 0; i < n; ++i) {
          const size_t bb = fields[f].block_bytes();
          const std::string d = diff(object + object_offset(fields, n, f, i),
                                     b.original[f].data() + static_cast<size_t>(src[i]) * bb, bb,
                                     "object: field " + std::to_string(f) + " (" + fields[f].name + ") block " +
                                         std::to_string(i));
          REQUIRE(d == "");
        }

      // Into other blocks: those now equal the gathered ones, every other block is untouched.
      copy(b, ucf, dst, object, unit_copy_direction::scatter, /*segment_major=*/true);
      for (size_t f = 0; f < fields.size(); ++f) {
        const size_t bb = fields[f].block_bytes();
        for (int32_t u = 0; u < arena_blocks; ++u) {
          int32_t from = u;
          for (int32_t i = 0; i < n; ++i)
            if (dst[i] == u) from = src[i];
          const std::string d = diff(b.region(f) + static_cast<size_t>(u) * bb,
                                     b.original[f].data() + static_cast<size_t>(from) * bb, bb,
                                     "arena: field " + std::to_string(f) + " (" + fields[f].name + ") block " +
                                         std::to_string(u));
          REQUIRE(d == "");
        }
      }
      b.dev->free_host_pinned(object);
    }
}

TEST_CASE("kv codec: a negative unit id skips its block in both directions, moving no other") {
  for (auto preset : presets)
    for (auto kv : dtypes) {
      built b(preset, kv);
      const auto& fields = b.fields();
      INFO(to_string(preset) << " kv " << to_string(kv));
      unit_copy_fields ucf(fields, *b.dev);
      const std::vector<int32_t> ids = {5, -1, 12, -7};
      const int32_t n = static_cast<int32_t>(ids.size());
      const size_t object_bytes = kv_chunk_object_bytes(fields, n);
      auto* object = static_cast<uint8_t*>(b.dev->alloc_host_pinned(object_bytes));

      // Gather: skipped blocks keep the buffer's 0xee, the others sit where the formula says.
      std::memset(object, 0xee, object_bytes);
      copy(b, ucf, ids, object, unit_copy_direction::gather, /*segment_major=*/true);
      for (size_t f = 0; f < fields.size(); ++f)
        for (int32_t i = 0; i < n; ++i) {
          const size_t bb = fields[f].block_bytes();
          const std::vector<uint8_t> untouched(bb, 0xee);
          const uint8_t* want = ids[i] < 0 ? untouched.data() : b.original[f].data() + static_cast<size_t>(ids[i]) * bb;
          REQUIRE(diff(object + object_offset(fields, n, f, i), want, bb,
                       "field " + std::to_string(f) + " block " + std::to_string(i)) == "");
        }

      // Scatter a buffer of fresh bytes: only blocks 5 and 12 change, to object blocks 0 and 2.
      std::mt19937 gen(99);
      for (size_t k = 0; k < object_bytes; ++k) object[k] = static_cast<uint8_t>(gen());
      copy(b, ucf, ids, object, unit_copy_direction::scatter, /*segment_major=*/true);
      for (size_t f = 0; f < fields.size(); ++f) {
        const size_t bb = fields[f].block_bytes();
        for (int32_t u = 0; u < arena_blocks; ++u) {
          const uint8_t* want = b.original[f].data() + static_cast<size_t>(u) * bb;
          if (u == 5) want = object + object_offset(fields, n, f, 0);
          if (u == 12) want = object + object_offset(fields, n, f, 2);
          REQUIRE(diff(b.region(f) + static_cast<size_t>(u) * bb, want, bb,
                       "field " + std::to_string(f) + " arena block " + std::to_string(u)) == "");
        }
      }
      b.dev->free_host_pinned(object);
    }
}

TEST_CASE("kv codec: without segment_major the buffer stays unit-major") {
  for (auto preset : presets)
    for (auto kv : dtypes) {
      built b(preset, kv);
      const auto& fields = b.fields();
      INFO(to_string(preset) << " kv " << to_string(kv));
      unit_copy_fields ucf(fields, *b.dev);
      CHECK(ucf.unit_bytes() == unit_bytes_of(fields));
      const std::vector<int32_t> ids = {4, 13, 8};
      const int32_t n = static_cast<int32_t>(ids.size());
      std::vector<uint8_t> unit_major(kv_chunk_object_bytes(fields, n), 0xee);
      // A save beside a forward is staged on the GPU only when its args carry the unit's bytes
      // (kernels/hip/unit_copy.hip); without them it falls back to the slower direct copy.
      const unit_copy_args args =
          chunk_copy_args(ucf, ids.data(), n, unit_major.data(), unit_copy_direction::gather, true);
      CHECK(args.unit_bytes == unit_bytes_of(fields));
      CHECK(args.num_units == n);
      copy(b, ucf, ids, unit_major.data(), unit_copy_direction::gather, /*segment_major=*/false);
      // Unit i's field f at i·unit_bytes + (block bytes of the fields before f).
      size_t before = 0;
      for (size_t f = 0; f < fields.size(); ++f) {
        const size_t bb = fields[f].block_bytes();
        for (int32_t i = 0; i < n; ++i)
          REQUIRE(diff(unit_major.data() + static_cast<size_t>(i) * unit_bytes_of(fields) + before,
                       b.original[f].data() + static_cast<size_t>(ids[i]) * bb, bb,
                       "field " + std::to_string(f) + " unit " + std::to_string(i)) == "");
        before += bb;
      }
      // The two layouts hold the same bytes in different orders.
      std::vector<uint8_t> object(unit_major.size(), 0xee);
      copy(b, ucf, ids, object.data(), unit_copy_direction::gather, /*segment_major=*/true);
      CHECK(object != unit_major);
    }
}
