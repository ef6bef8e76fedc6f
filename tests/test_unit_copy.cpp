#include <catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernel_table.hpp"
#include "kernels/cpu/unit_copy.hpp"
#include "kernels/object_checksum.hpp"
#include "runtime/checksum.hpp"

using namespace ordo;

namespace {

// An arena of `blocks` blocks per field, one region per field, as the KV arena lays them out.
struct arena {
  std::vector<uint64_t> block_bytes;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<uint8_t*> regions;
  arena(std::vector<uint64_t> bb, int32_t blocks) : block_bytes(std::move(bb)) {
    for (uint64_t b : block_bytes) storage.emplace_back(b * static_cast<size_t>(blocks), 0);
    for (auto& s : storage) regions.push_back(s.data());
  }
  uint64_t unit_bytes() const { return std::accumulate(block_bytes.begin(), block_bytes.end(), uint64_t{0}); }
  uint8_t* block(size_t f, int32_t u) { return regions[f] + static_cast<size_t>(u) * block_bytes[f]; }
};

unit_copy_args args_of(arena& a, const std::vector<int32_t>& ids, uint8_t* host, unit_copy_direction dir,
                       bool segment_major = false) {
  unit_copy_args args;
  args.regions = a.regions.data();
  args.block_bytes = a.block_bytes.data();
  args.unit_ids = ids.data();
  args.host = host;
  args.num_fields = static_cast<int32_t>(a.block_bytes.size());
  args.num_units = static_cast<int32_t>(ids.size());
  args.max_block_bytes = *std::max_element(a.block_bytes.begin(), a.block_bytes.end());
  args.direction = dir;
  args.segment_major = segment_major;
  return args;
}

} // namespace

TEST_CASE("unit copy: the host buffer is unit-major, then field order, whole field blocks") {
  arena a({24, 40, 8}, 4);
  for (size_t f = 0; f < 3; ++f)
    for (int32_t u = 0; u < 4; ++u) std::memset(a.block(f, u), static_cast<int>(16 * u + f + 1), a.block_bytes[f]);
  const std::vector<int32_t> ids = {2, 0};
  std::vector<uint8_t> host(a.unit_bytes() * ids.size(), 0xee);
  cpu::unit_copy(args_of(a, ids, host.data(), unit_copy_direction::gather));
  std::vector<uint8_t> expected;
  for (int32_t u : ids)
    for (size_t f = 0; f < 3; ++f) expected.insert(expected.end(), a.block_bytes[f], static_cast<uint8_t>(16 * u + f + 1));
  CHECK(host == expected);
}

TEST_CASE("unit copy: segment-major puts each field's blocks together, in unit id order") {
  arena a({24, 40, 8}, 4);
  for (size_t f = 0; f < 3; ++f)
    for (int32_t u = 0; u < 4; ++u) std::memset(a.block(f, u), static_cast<int>(16 * u + f + 1), a.block_bytes[f]);
  const std::vector<int32_t> ids = {2, 0, 3};
  std::vector<uint8_t> host(a.unit_bytes() * ids.size(), 0xee);
  cpu::unit_copy(args_of(a, ids, host.data(), unit_copy_direction::gather, /*segment_major=*/true));
  std::vector<uint8_t> expected;
  for (size_t f = 0; f < 3; ++f)
    for (int32_t u : ids) expected.insert(expected.end(), a.block_bytes[f], static_cast<uint8_t>(16 * u + f + 1));
  CHECK(host == expected);
}

TEST_CASE("unit copy: a negative unit id is skipped, in either layout and direction") {
  for (bool segment_major : {false, true}) {
    INFO("segment_major " << segment_major);
    arena a({24, 40, 8}, 4);
    for (size_t f = 0; f < 3; ++f)
      for (int32_t u = 0; u < 4; ++u) std::memset(a.block(f, u), static_cast<int>(16 * u + f + 1), a.block_bytes[f]);
    const std::vector<int32_t> ids = {-1, 3, -2};
    std::vector<uint8_t> host(a.unit_bytes() * ids.size(), 0xee);
    cpu::unit_copy(args_of(a, ids, host.data(), unit_copy_direction::gather, segment_major));
    // Only entry 1 (unit 3) was written, at the same place as without the skipped entries.
    std::vector<uint8_t> expected(host.size(), 0xee);
    uint64_t before = 0;
    for (size_t f = 0; f < 3; ++f) {
      const uint64_t at = segment_major ? ids.size() * before + a.block_bytes[f] : a.unit_bytes() + before;
      std::memset(expected.data() + at, static_cast<int>(16 * 3 + f + 1), a.block_bytes[f]);
      before += a.block_bytes[f];
    }
    CHECK(host == expected);
    // Scatter of a 0x55 buffer: unit 3 becomes 0x55, every other block stays as it was.
    std::fill(host.begin(), host.end(), 0x55);
    cpu::unit_copy(args_of(a, ids, host.data(), unit_copy_direction::scatter, segment_major));
    for (size_t f = 0; f < 3; ++f)
      for (int32_t u = 0; u < 4; ++u) {
        const std::vector<uint8_t> want(a.block_bytes[f], static_cast<uint8_t>(u == 3 ? 0x55 : 16 * u + f + 1));
        CHECK(std::memcmp(a.block(f, u), want.data(), want.size()) == 0);
      }
  }
}

TEST_CASE("unit copy: gather then scatter into a second arena round-trips byte for byte") {
  std::mt19937 gen(1234);
  for (int trial = 0; trial < 20; ++trial) {
    const int32_t blocks = 16;
    std::vector<uint64_t> bb;
    const int nf = 1 + static_cast<int>(gen() % 6);
    for (int f = 0; f < nf; ++f) bb.push_back(1 + gen() % 300);
    arena src(bb, blocks), dst(bb, blocks);
    for (auto& s : src.storage)
      for (auto& x : s) x = static_cast<uint8_t>(gen());
    // Distinct random units: untouched units of the second arena must stay zero.
    std::vector<int32_t> all(blocks);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), gen);
    const std::vector<int32_t> ids(all.begin(), all.begin() + 1 + gen() % blocks);
    const bool segment_major = trial % 2 == 1;
    std::vector<uint8_t> host(src.unit_bytes() * ids.size(), 0);
    cpu::unit_copy(args_of(src, ids, host.data(), unit_copy_direction::gather, segment_major));
    cpu::unit_copy(args_of(dst, ids, host.data(), unit_copy_direction::scatter, segment_major));
    std::vector<bool> picked(blocks, false);
    for (int32_t u : ids) picked[static_cast<size_t>(u)] = true;
    for (size_t f = 0; f < bb.size(); ++f)
      for (int32_t u = 0; u < blocks; ++u) {
        const std::vector<uint8_t> zero(bb[f], 0);
        const uint8_t* want = picked[static_cast<size_t>(u)] ? src.block(f, u) : zero.data();
        REQUIRE(std::memcmp(dst.block(f, u), want, bb[f]) == 0);
      }
  }
}

TEST_CASE("unit copy: the CPU kernel table runs it as stream work") {
  auto dev = make_cpu_device({/*chaos_seed=*/5, /*chaos_max_delay_us=*/200});
  auto table = make_cpu_kernel_table(*dev);
  arena src({32, 16}, 3), dst({32, 16}, 3);
  for (auto& s : src.storage)
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(i * 13 + 5);
  const std::vector<int32_t> ids = {1, 2};
  std::vector<uint8_t> host(src.unit_bytes() * ids.size(), 0);
  table->unit_copy(stream_kind::save, args_of(src, ids, host.data(), unit_copy_direction::gather));
  const event_id saved = dev->record(stream_kind::save);
  dev->wait(stream_kind::load, saved);
  table->unit_copy(stream_kind::load, args_of(dst, ids, host.data(), unit_copy_direction::scatter));
  dev->synchronize();
  CHECK(std::memcmp(dst.block(0, 1), src.block(0, 1), 32 * 2) == 0);
  CHECK(std::memcmp(dst.block(1, 1), src.block(1, 1), 16 * 2) == 0);
  CHECK(dst.storage[0][0] == 0);
}

TEST_CASE("unit copy: a summed launch adds the checksum terms of the host buffer it leaves") {
  arena a({24, 40, 8}, 4);
  std::mt19937 rng(5);
  for (auto& s : a.storage)
    for (auto& b : s) b = static_cast<uint8_t>(rng());
  const std::vector<int32_t> ids = {3, -1, 0};
  for (bool segment_major : {false, true}) {
    std::vector<uint8_t> host(a.unit_bytes() * ids.size(), 0x5c); // the skipped entry keeps these
    uint64_t sum = 7;                                            // the launch adds to what is there
    auto g = args_of(a, ids, host.data(), unit_copy_direction::gather, segment_major);
    g.checksum = &sum;
    cpu::unit_copy(g);
    CHECK(sum == 7 + checksum_terms(host.data(), host.size(), 0));
    CHECK(checksum_finish(sum - 7, host.size()) == object_checksum(host.data(), host.size()));
    uint64_t back = 0;
    auto s = args_of(a, ids, host.data(), unit_copy_direction::scatter, segment_major);
    s.checksum = &back;
    cpu::unit_copy(s);
    CHECK(back == sum - 7);
    host[5] ^= 0x10; // a corrupted byte of a moved block, then of the skipped one: the load sees both
    back = 0;
    cpu::unit_copy(s);
    CHECK(back != sum - 7);
    host[5] ^= 0x10;
    host[(segment_major ? 24 : a.unit_bytes()) + 1] ^= 0x10; // entry 1 (skipped), field 0
    back = 0;
    cpu::unit_copy(s);
    CHECK(back != sum - 7);
  }
}
