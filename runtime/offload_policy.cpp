#include "runtime/offload_policy.hpp"

#include <algorithm>
#include <stdexcept>

namespace ordo {

offload_policy::offload_policy(const offload_options& options) : opt_(options) {
  if (opt_.block_size <= 0 || opt_.chunk_size <= 0 || opt_.chunk_size % opt_.block_size != 0)
    throw std::invalid_argument("offload: chunk_size " + std::to_string(opt_.chunk_size) +
                                " must be a positive multiple of block_size " + std::to_string(opt_.block_size));
}

object_key offload_policy::kv_key(uint64_t block_hash) const {
  return {opt_.namespace_id, block_hash, static_cast<uint8_t>(object_kind::kv_chunk)};
}

object_key offload_policy::state_key(uint64_t block_hash) const {
  return {opt_.namespace_id, block_hash, static_cast<uint8_t>(object_kind::state_image)};
}

std::vector<object_key> offload_policy::keys_of(const std::vector<uint64_t>& hashes) const {
  std::vector<object_key> keys;
  keys.reserve(2 * hashes.size());
  for (auto h : hashes) {
    keys.push_back(kv_key(h));
    keys.push_back(state_key(h));
  }
  return keys;
}

store_contains offload_policy::probe(const connector_lookup& lookup) const {
  store_contains out;
  if (opt_.loads)
    out.keys = keys_of(lookup.hashes);
  return out;
}

connector_lookup_done offload_policy::answer(const connector_lookup& lookup, const store_contains_done& found) const {
  connector_lookup_done out;
  out.request_id = lookup.request_id;
  out.connector = opt_.name;
  out.granularity = found.granularity;
  const int32_t nh = static_cast<int32_t>(lookup.hashes.size());
  if (!opt_.loads || found.present.size() != 2 * lookup.hashes.size())
    return out;
  auto kv_at = [&](int32_t j) { return found.present[2 * static_cast<size_t>(j - 1)] != 0; };
  auto state_at = [&](int32_t j) { return found.present[2 * static_cast<size_t>(j - 1) + 1] != 0; };
  const int32_t per_chunk = opt_.chunk_size / opt_.block_size;
  if (chunk_granularity(found.granularity)) {
    // SPEC D2, a chunk store: whole chunks only, never one that reaches the last prompt token
    // (coverage and state images up to floor_chunk(P - 1)), state images on the chunk grid only.
    const int32_t limit = std::max(0, (lookup.num_prompt_tokens - 1) / opt_.chunk_size * opt_.chunk_size);
    const int32_t max_blocks = std::min(nh, limit / opt_.block_size);
    int32_t pos = 0;
    while (pos + per_chunk <= max_blocks && kv_at(pos + per_chunk)) {
      out.cpu_chunks.push_back({pos, per_chunk, lookup.hashes[static_cast<size_t>(pos + per_chunk - 1)]});
      pos += per_chunk;
    }
    out.cpu_tokens = pos * opt_.block_size;
    for (int32_t j = per_chunk; j <= max_blocks; j += per_chunk)
      if (state_at(j))
        out.cpu_state_positions.push_back(j * opt_.block_size);
    return out;
  }
  int32_t pos = 0; // blocks covered, on the chunk grid while whole chunks continue
  while (pos < nh) {
    if (pos + per_chunk <= nh && kv_at(pos + per_chunk)) {
      out.cpu_chunks.push_back({pos, per_chunk, lookup.hashes[static_cast<size_t>(pos + per_chunk - 1)]});
      pos += per_chunk;
      continue;
    }
    // The last partial chunk of a finished prompt, stored under its exact blocks (SPEC C1).
    for (int32_t j = std::min(pos + per_chunk - 1, nh); j > pos; --j)
      if (kv_at(j)) {
        out.cpu_chunks.push_back({pos, j - pos, lookup.hashes[static_cast<size_t>(j - 1)]});
        pos = j;
        break;
      }
    break;
  }
  out.cpu_tokens = pos * opt_.block_size;
  for (int32_t j = 1; j <= nh; ++j)
    if (state_at(j))
      out.cpu_state_positions.push_back(j * opt_.block_size);
  return out;
}

store_step offload_policy::to_store(const connector_step& step) const {
  store_step out;
  out.header = step.header;
  out.evict_all = step.evict_all;
  bool all_summed = true; // the commits carry the gathers' checksums only if every one has it
  for (const auto& f : step.finished) {
    if (f.is_save && f.ok) {
      out.commits.push_back(f.key);
      out.commit_checksums.push_back(f.checksum);
      all_summed = all_summed && f.summed;
    } else {
      (f.is_save ? out.aborts : f.corrupt ? out.unpins_corrupt : out.unpins).push_back(f.key);
    }
  }
  if (!all_summed)
    out.commit_checksums.clear();
  if (opt_.loads)
    for (const auto& l : step.loads)
      out.pins.push_back(l.object);
  out.pins_summed = opt_.loads_summed && !out.pins.empty();
  if (opt_.saves)
    for (const auto& s : step.saves)
      out.reserves.push_back(s.object);
  for (const auto& l : step.leases)
    out.leases.push_back({std::to_string(l.request_id), keys_of(l.hashes), opt_.lease_ms});
  return out;
}

connector_step_done offload_policy::from_store(const connector_step& step, const store_step_done& done) const {
  connector_step_done out;
  out.header = step.header;
  out.stats = done.stats;
  out.num_evicted = done.num_evicted;
  out.granularity = done.granularity;
  // `summed`: the step's scatters check the granted data against the store's checksum.
  auto grants = [&](const std::vector<transfer_order>& orders, bool allowed, bool summed,
                    const std::vector<store_grant>& answers, const char* refused, std::vector<transfer_grant>& into) {
    if (allowed && answers.size() != orders.size())
      throw std::logic_error("store_step_done answers " + std::to_string(answers.size()) + " of " +
                             std::to_string(orders.size()) + " orders");
    for (size_t i = 0; i < orders.size(); ++i) {
      transfer_grant g;
      g.request_id = orders[i].request_id;
      g.key = orders[i].object.key;
      if (allowed) {
        g.ok = answers[i].ok;
        g.status = answers[i].status;
        g.data_offset = answers[i].data_offset;
        g.data_bytes = answers[i].data_bytes;
        if (summed && g.ok) {
          g.summed = true;
          g.checksum = answers[i].checksum;
        }
      } else {
        g.status = refused;
      }
      into.push_back(std::move(g));
    }
  };
  grants(step.loads, opt_.loads, opt_.loads_summed, done.pins, "kv_role kv_producer does not load", out.loads);
  grants(step.saves, opt_.saves, false, done.reserves, "kv_role kv_consumer does not save", out.saves);
  for (size_t i = 0; i < step.leases.size(); ++i)
    out.leases.push_back({step.leases[i].request_id, i < done.leased.size() ? done.leased[i] : 0, opt_.lease_ms});
  return out;
}

} // namespace ordo
