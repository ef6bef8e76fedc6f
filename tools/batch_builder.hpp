// Packs requests into a device_batch in device memory (one allocation, uploaded with copy_async
// on `load` + synchronize), for tests/test_model.cpp and tools/gpu_check.cpp. Rows are grouped by request in the given order; a request
// with `sample` set is sampled at its last row.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/batch.hpp"
#include "runtime/device.hpp"

namespace ordo::test {

struct request_rows {
  std::vector<int32_t> tokens;  // the rows of this step
  int32_t first_position = 0;   // position of tokens[0]
  std::vector<int32_t> blocks;  // the request's whole block table (covers every position so far)
  int32_t state_slot = -1;
  bool reset_state = false;     // true on the request's first chunk
  bool sample = true;
  bool sample_every_row = false; // sample each row of the step, not only the last (logits of every position)
  float temperature = 0.0f;
  uint64_t seed = 0;
};

class batch_builder {
public:
  batch_builder(device& dev, int32_t block_size) : dev_(dev), block_size_(block_size) {}
  ~batch_builder() {
    for (void* p : buffers_) dev_.free_device(p);
  }
  batch_builder(const batch_builder&) = delete;
  batch_builder& operator=(const batch_builder&) = delete;

  // The returned batch stays valid until the builder is destroyed.
  device_batch build(const std::vector<request_rows>& reqs) {
    std::vector<int32_t> token_ids, positions, token_req, slot_mapping, req_token_start{0}, req_first_position,
        req_block_table_start{0}, block_tables, req_state_slot, req_reset_state, sample_rows;
    std::vector<float> temps;
    std::vector<uint64_t> seeds;
    for (size_t r = 0; r < reqs.size(); ++r) {
      const request_rows& q = reqs[r];
      for (size_t i = 0; i < q.tokens.size(); ++i) {
        const int32_t p = q.first_position + static_cast<int32_t>(i);
        if (q.sample_every_row && i + 1 < q.tokens.size()) {
          sample_rows.push_back(static_cast<int32_t>(token_ids.size()));
          temps.push_back(q.temperature);
          seeds.push_back(q.seed);
        }
        token_ids.push_back(q.tokens[i]);
        positions.push_back(p);
        token_req.push_back(static_cast<int32_t>(r));
        slot_mapping.push_back(q.blocks.at(p / block_size_) * block_size_ + p % block_size_);
      }
      req_token_start.push_back(static_cast<int32_t>(token_ids.size()));
      req_first_position.push_back(q.first_position);
      block_tables.insert(block_tables.end(), q.blocks.begin(), q.blocks.end());
      req_block_table_start.push_back(static_cast<int32_t>(block_tables.size()));
      req_state_slot.push_back(q.state_slot);
      req_reset_state.push_back(q.reset_state ? 1 : 0);
      if (q.sample && !q.tokens.empty()) {
        sample_rows.push_back(static_cast<int32_t>(token_ids.size()) - 1);
        temps.push_back(q.temperature);
        seeds.push_back(q.seed);
      }
    }
    std::vector<unsigned char> staging;
    std::vector<size_t> offsets;
    const auto put = [&](const void* data, size_t bytes) {
      staging.resize((staging.size() + 15) / 16 * 16);
      offsets.push_back(staging.size());
      staging.insert(staging.end(), static_cast<const unsigned char*>(data),
                     static_cast<const unsigned char*>(data) + bytes);
    };
    put(token_ids.data(), token_ids.size() * 4);
    put(positions.data(), positions.size() * 4);
    put(token_req.data(), token_req.size() * 4);
    put(slot_mapping.data(), slot_mapping.size() * 4);
    put(req_token_start.data(), req_token_start.size() * 4);
    put(req_first_position.data(), req_first_position.size() * 4);
    put(req_block_table_start.data(), req_block_table_start.size() * 4);
    put(block_tables.data(), block_tables.size() * 4);
    put(req_state_slot.data(), req_state_slot.size() * 4);
    put(req_reset_state.data(), req_reset_state.size() * 4);
    put(sample_rows.data(), sample_rows.size() * 4);
    put(temps.data(), temps.size() * 4);
    put(seeds.data(), seeds.size() * 8);
    unsigned char* d = static_cast<unsigned char*>(dev_.alloc_device(staging.size() + 16));
    buffers_.push_back(d);
    dev_.copy_async(stream_kind::load, d, staging.data(), staging.size());
    dev_.synchronize();

    device_batch b;
    b.num_tokens = static_cast<int32_t>(token_ids.size());
    b.num_reqs = static_cast<int32_t>(reqs.size());
    b.num_samples = static_cast<int32_t>(sample_rows.size());
    b.block_table_len = static_cast<int32_t>(block_tables.size());
    const auto at = [&](int i) { return d + offsets[i]; };
    b.token_ids = reinterpret_cast<const int32_t*>(at(0));
    b.positions = reinterpret_cast<const int32_t*>(at(1));
    b.token_req = reinterpret_cast<const int32_t*>(at(2));
    b.slot_mapping = reinterpret_cast<const int32_t*>(at(3));
    b.req_token_start = reinterpret_cast<const int32_t*>(at(4));
    b.req_first_position = reinterpret_cast<const int32_t*>(at(5));
    b.req_block_table_start = reinterpret_cast<const int32_t*>(at(6));
    b.block_tables = reinterpret_cast<const int32_t*>(at(7));
    b.req_state_slot = reinterpret_cast<const int32_t*>(at(8));
    b.req_reset_state = reinterpret_cast<const int32_t*>(at(9));
    b.sample_rows = reinterpret_cast<const int32_t*>(at(10));
    b.sample_temperature = reinterpret_cast<const float*>(at(11));
    b.sample_seed = reinterpret_cast<const uint64_t*>(at(12));
    return b;
  }

private:
  device& dev_;
  int32_t block_size_;
  std::vector<void*> buffers_;
};

} // namespace ordo::test
