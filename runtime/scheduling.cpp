#include "runtime/scheduling.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "runtime/prefix_hash.hpp"

namespace ordo {

namespace {

enum class request_state : uint8_t { looking_up, waiting, running, finished };
enum class loop_state : uint8_t { idle, awaiting_pool, awaiting_connector, awaiting_step };

int32_t ceil_div(int32_t a, int32_t b) { return (a + b - 1) / b; }

} // namespace

int32_t snap_checkpoint_interval(int32_t interval, int32_t block_size) {
  if (interval <= 0)
    return interval;
  return std::max(block_size, interval / block_size * block_size);
}

std::vector<int32_t> checkpoint_positions(int32_t prompt_len, int32_t block_size, int32_t interval) {
  std::vector<int32_t> out;
  if (interval == 0)
    return out;
  if (interval > 0)
    for (int32_t p = interval; p <= prompt_len; p += interval)
      out.push_back(p);
  int32_t anchor = (prompt_len - 1) / block_size * block_size;
  if (anchor > 0)
    out.push_back(anchor);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

struct scheduling::impl {
  struct request {
    completion_request spec;
    request_state state = request_state::looking_up;
    std::vector<int32_t> tokens; // prompt, then every sampled token
    std::vector<int32_t> generated;
    std::vector<uint64_t> hashes; // full-block hashes of `tokens`, as far as computed
    uint64_t root = 0;
    int32_t num_computed = 0;       // tokens whose KV / state the device holds
    int32_t num_committed_blocks = 0;
    std::vector<int32_t> block_table;
    int32_t state_slot = -1;
    bool needs_reset = false;
    bool admitted_once = false;
    int32_t resume_at = 0;
    int32_t from_hbm = 0;
    int32_t cpu_tokens = 0; // what the connector said the host tier holds
    int32_t store_tokens = 0;
    std::string reason;
    resume_reason reason_kind = resume_reason::cold;
    uint64_t digest = 0;
    int32_t num_preemptions = 0;
    double arrival_ms = 0;
    uint64_t order = 0; // admission order, oldest first
    std::vector<reserved_image> images; // checkpoints still to copy, ascending position
    uint64_t restore_hash = 0;          // pinned image to restore before the next forward
    std::vector<int32_t> restore_units;
    // Host tier.
    std::vector<kv_object> cpu_chunks;         // from the lookup
    std::vector<int32_t> cpu_state_positions;
    int32_t cpu_boundary = 0;  // where the host tier alone could resume it (SPEC C2), 0 = nowhere
    int32_t from_cpu = 0;
    int32_t from_store = 0;    // the same, when the host tier is a store server
    bool peer_lookup = false;  // P/D: the host-tier coverage lies in the prefill node named by kv_peer
    int32_t from_peer = 0;     // the same, pulled from that prefill node
    bool parked = false;       // its loads are in the step in flight
    int32_t save_watermark = 0; // KV tokens [0, w) known stored (chunk grid, or the prompt's tail end)
    int32_t save_failures = 0;  // refused reserves of the boundary at the watermark (C5: at most 3)
    std::vector<int32_t> load_units; // private units for the host image when none is reserved at B
    // Output.
    int32_t num_streamed = 0;       // generated tokens sent as chunks (a possible stop is held back)
    double first_token_ms = 0;      // arrival → first sample
    double last_token_ms = 0;       // time of the latest sample
    std::vector<float> inter_token_ms;
  };

  // What a granted order moves, kept beside the connector step in flight.
  struct transfer_meta {
    uint64_t request_id = 0;
    object_ref object;
    std::vector<int32_t> units;
    int32_t boundary = 0;   // loads: the resume point; saves: the KV watermark after it
    uint64_t image_hash = 0; // loads of a state image: the HBM image the units become
  };

  scheduler_options opt;
  std::map<uint64_t, request> requests;
  std::deque<uint64_t> waiting;     // FIFO; preempted requests go to the front
  std::vector<uint64_t> running;    // admission order
  std::vector<uint64_t> to_release; // given back in the next pool step
  std::vector<uint64_t> cancels_pending; // applied at the next pool step (the loop is idle there)
  std::vector<evict_request> evicts_pending;
  std::vector<evict_request> evicts_in_flight;
  std::vector<evict_request> cpu_evicts_pending, cpu_evicts_in_flight; // tier "cpu": via the connector
  std::vector<int32_t> free_slots;
  scheduler_outbox outbox;
  scheduler_stats stats;
  sequence_stamp pool_stamp;
  sequence_stamp step_stamp;
  loop_state loop = loop_state::idle;
  pool_step pool_in_flight;
  std::vector<uint64_t> step_requests; // requests of the step in flight, plan order
  command_header step_in_flight;
  std::vector<block_commit> pending_commits; // of requests finished or preempted
  std::vector<int32_t> pending_clears;       // units given back, for the next plan
  std::vector<uint64_t> step_ready, pending_ready;     // images copied by the step / to report
  std::vector<image_unpin> step_unpins, pending_unpins; // restores done by the step / to report
  std::vector<image_unpin> pending_aborts;               // reserved images a request skipped
  uint64_t next_order = 0;
  // Host tier: the turn's plan waits for the connector's grants.
  sequence_stamp connector_stamp;
  std::optional<connector_step> connector_to_send;
  connector_step connector_in_flight;
  std::vector<transfer_meta> load_meta, save_meta; // parallel to connector_in_flight.loads / saves
  step_plan plan_in_progress;
  std::vector<transfer_result> step_finished, pending_finished; // transfers of the step / to report
  std::vector<size_t> step_save_finished; // per plan save: its step_finished entry (a copy: SIZE_MAX)
  // Loads whose step's scatter checks the data (transfer_grant::summed): per plan load, what its
  // sum must be; and per request resumed by them, how to undo the resume if one comes back wrong.
  struct load_check {
    uint64_t request_id = 0;
    size_t finished = 0; // its step_finished entry
    bool summed = false;
    uint64_t checksum = 0;
    int32_t first_token = -1; // a KV chunk's; -1 for a state image
  };
  struct resume_undo {
    int32_t computed = 0; // H, where the request recomputes from
    uint64_t restore_hash = 0;
    std::vector<int32_t> restore_units;
    bool needs_reset = false;
    int32_t boundary = 0;     // B
    uint64_t image_hash = 0;  // the reserved HBM image at B the loaded image was to become
    std::vector<int32_t> image_units;
    int32_t loaded = 0;       // tokens counted as from the host tier (num_preemptions == 0)
  };
  std::vector<load_check> step_load_checks;
  std::map<uint64_t, resume_undo> step_undo;
  std::vector<uint64_t> step_parked;                            // requests whose loads are in the step
  // P/D prefill: leases to take in the next connector step, and the results that wait for them.
  std::vector<lease_order> pending_leases;
  std::map<uint64_t, completion_result> held_results;
  bool chunk_store = false; // the store's granularity is "chunk" (SPEC D2), per its latest answer

  explicit impl(const scheduler_options& o)
      : opt(o), pool_stamp(o.epoch), step_stamp(o.epoch), connector_stamp(o.epoch) {
    stats.num_free_blocks = opt.num_blocks;
    stats.num_available_blocks = opt.num_blocks;
    if (opt.has_recurrent_state)
      for (int32_t s = opt.max_state_slots - 1; s >= 0; --s)
        free_slots.push_back(s);
  }

  // The host tier's name in reasons: "store" when it is a store server.
  std::string tier_name() const { return opt.host_tier_is_store ? "store" : "host tier"; }
  std::string tier_name(const request& r) const { return r.peer_lookup ? "prefill node " + r.spec.kv_peer : tier_name(); }

  void fail(uint64_t id, std::string message) {
    outbox.failures.push_back({id, std::move(message), "invalid_request_error"});
    requests.erase(id);
  }

  // Full-block hashes are needed up to the tokens the device holds (commits) or the prompt.
  void ensure_hashes(request& r, size_t num_tokens) {
    extend_prefix_hashes(r.root, r.tokens, r.spec.media, opt.block_size, num_tokens, r.hashes);
  }

  // SPEC C6 with the data checked on the device: each summed load's checksum from step_done
  // against the object's. A wrong one fails the load after its step; nothing read the bytes (the
  // request was parked: no forward of it ran), so the request resumes as if the load had been
  // refused (from H, its HBM image kept pinned), the recomputed chunks are saved again, and the
  // store drops the object (transfer_result::corrupt). Sums missing where asked count as wrong.
  void check_loads(const step_done& done) {
    std::map<uint64_t, int32_t> failed; // request → lowest first token of a failed KV chunk
    const bool all_sums = done.load_checksums.size() == step_load_checks.size();
    for (size_t k = 0; k < step_load_checks.size(); ++k) {
      const auto& c = step_load_checks[k];
      if (!c.summed || (all_sums && done.load_checksums[k] == c.checksum))
        continue;
      step_finished[c.finished].corrupt = true;
      ++stats.load_failures_total;
      ++stats.load_checksum_failures_total;
      auto it = failed.emplace(c.request_id, std::numeric_limits<int32_t>::max()).first;
      if (c.first_token >= 0)
        it->second = std::min(it->second, c.first_token);
    }
    for (const auto& [id, lowest] : failed) {
      auto r = requests.find(id);
      auto u = step_undo.find(id);
      if (r != requests.end() && u != step_undo.end())
        undo_resume(r->second, u->second, lowest);
    }
    step_load_checks.clear();
    step_undo.clear();
  }

  void undo_resume(request& r, const resume_undo& u, int32_t lowest) {
    const uint64_t id = r.spec.request_id;
    r.num_computed = u.computed;
    r.needs_reset = u.needs_reset;
    if (u.restore_hash) { // the HBM image at H stays pinned: the load step's unpin is taken back
      step_unpins.erase(std::remove_if(step_unpins.begin(), step_unpins.end(),
                                       [&](const image_unpin& x) { return x.request_id == id && x.hash == u.restore_hash; }),
                        step_unpins.end());
      r.restore_hash = u.restore_hash;
      r.restore_units = u.restore_units;
    }
    if (u.image_hash) { // not an HBM checkpoint: its units take the image when the forward reaches B
      step_ready.erase(std::remove(step_ready.begin(), step_ready.end(), u.image_hash), step_ready.end());
      r.images.push_back({u.boundary, u.image_hash, u.image_units});
      std::sort(r.images.begin(), r.images.end(),
                [](const reserved_image& a, const reserved_image& b) { return a.position < b.position; });
    }
    if (lowest != std::numeric_limits<int32_t>::max())
      r.save_watermark = std::min(r.save_watermark, lowest / opt.chunk_size * opt.chunk_size);
    if (r.peer_lookup) {
      --stats.pd_pulls_ok;
      ++stats.pd_pulls_failed;
    }
    if (r.num_preemptions == 0) {
      (r.peer_lookup ? r.from_peer : opt.host_tier_is_store ? r.from_store : r.from_cpu) = 0;
      (opt.host_tier_is_store && !r.peer_lookup ? stats.prompt_tokens_from_store : stats.prompt_tokens_from_cpu) -=
          u.loaded;
      r.resume_at = u.computed;
      r.reason_kind = resume_reason::host_load_failed;
      r.reason = tier_name(r) + " load failed (bad_checksum, summed by the scatter on the device): recomputed from token " +
                 std::to_string(u.computed);
    }
  }

  void commits_for(request& r, std::vector<block_commit>& out) {
    int32_t full = r.num_computed / opt.block_size;
    if (full <= r.num_committed_blocks)
      return;
    ensure_hashes(r, static_cast<size_t>(full) * opt.block_size);
    for (int32_t b = r.num_committed_blocks; b < full; ++b)
      out.push_back({r.spec.request_id, b, r.hashes[b]});
    r.num_committed_blocks = full;
  }

  void preempt(request& r) {
    // Recompute later from the prefix cache or from 0; tokens sampled so far stay sampled.
    commits_for(r, pending_commits);
    r.images.clear();   // the pool drops COPYING images with the release
    r.restore_hash = 0; // and the pin
    r.restore_units.clear();
    r.state = request_state::waiting;
    r.num_computed = 0;
    r.num_committed_blocks = 0;
    r.block_table.clear();
    release_slot(r);
    ++r.num_preemptions;
    ++stats.num_preemptions;
    to_release.push_back(r.spec.request_id);
    waiting.push_front(r.spec.request_id);
  }

  void release_slot(request& r) {
    if (r.state_slot >= 0)
      free_slots.push_back(r.state_slot);
    r.state_slot = -1;
  }

  void finish(request& r, const std::string& finish_reason, double now_ms) {
    commits_for(r, pending_commits);
    r.state = request_state::finished;
    release_slot(r);
    to_release.push_back(r.spec.request_id);
    completion_result res;
    res.request_id = r.spec.request_id;
    res.token_ids = r.generated;
    res.finish_reason = finish_reason;
    res.prompt_tokens = static_cast<int32_t>(r.spec.prompt.size());
    res.cached_tokens = r.resume_at;
    res.resume_at = r.resume_at;
    res.from_hbm = r.from_hbm;
    res.from_cpu = r.from_cpu;
    res.from_store = r.from_store;
    res.from_peer = r.from_peer;
    res.reason = r.reason;
    res.reason_kind = r.reason_kind;
    res.logits_digest = r.digest;
    res.num_preemptions = r.num_preemptions;
    res.duration_ms = now_ms - r.arrival_ms;
    res.first_token_ms = r.first_token_ms;
    res.inter_token_ms = std::move(r.inter_token_ms);
    if (opt.pd && r.spec.remote_decode) { // answered once its objects are committed and leased
      const auto full = static_cast<size_t>(r.spec.prompt.size()) / static_cast<size_t>(opt.block_size);
      pending_leases.push_back({r.spec.request_id,
                                std::vector<uint64_t>(r.hashes.begin(), r.hashes.begin() + std::min(full, r.hashes.size())),
                                static_cast<int32_t>(r.spec.prompt.size())});
      held_results.emplace(r.spec.request_id, std::move(res));
    } else {
      outbox.results.push_back(std::move(res));
    }
    ++stats.num_finished;
    requests.erase(r.spec.request_id);
  }

  // Cancellations take effect only here, with no step, pool step or connector step in flight,
  // so no reply in flight can name a request that is gone. Released exactly like a finished
  // request: full blocks are committed to the prefix index, the rest is given back.
  void apply_cancels() {
    for (auto id : cancels_pending) {
      auto it = requests.find(id);
      if (it == requests.end())
        continue;
      auto& r = it->second;
      if (r.state == request_state::waiting) {
        waiting.erase(std::find(waiting.begin(), waiting.end(), id));
      } else if (r.state == request_state::running) {
        commits_for(r, pending_commits);
        release_slot(r);
        to_release.push_back(id);
        running.erase(std::find(running.begin(), running.end(), id));
      } // looking_up: its lookup reply finds no request and is dropped
      ++stats.num_cancelled;
      requests.erase(it);
    }
    cancels_pending.clear();
    stats.num_waiting = static_cast<int32_t>(waiting.size());
    stats.num_running = static_cast<int32_t>(running.size());
  }

  // How many trailing generated tokens could still become a stop sequence (held back from the
  // stream); `matched` gets the length of a complete stop sequence at the end, else 0.
  static size_t stop_holdback(const request& r, size_t& matched) {
    matched = 0;
    size_t hold = 0;
    const auto& g = r.generated;
    for (const auto& stop : r.spec.stop) {
      const auto& s = stop.token_ids;
      if (s.empty())
        continue;
      for (size_t k = std::min(s.size(), g.size()); k > 0; --k) {
        if (!std::equal(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(k), g.end() - static_cast<std::ptrdiff_t>(k)))
          continue;
        if (k == s.size())
          matched = std::max(matched, k);
        else
          hold = std::max(hold, k);
        break;
      }
    }
    return hold;
  }

  // Streams generated tokens [num_streamed, end).
  void stream_until(request& r, size_t end) {
    if (!r.spec.stream)
      return;
    for (; static_cast<size_t>(r.num_streamed) < end; ++r.num_streamed)
      outbox.chunks.push_back({r.spec.request_id, r.num_streamed, r.generated[static_cast<size_t>(r.num_streamed)]});
  }

  // The KV chunk object of the full blocks [first, last) of `r`, filed under its last block's hash.
  object_ref kv_object(const request& r, int32_t first, int32_t last) const {
    const int32_t blocks = (last - first) / opt.block_size;
    return {{opt.namespace_id, r.hashes[static_cast<size_t>(last / opt.block_size - 1)],
             static_cast<uint8_t>(object_kind::kv_chunk)},
            first, last - first, blocks, static_cast<uint64_t>(blocks) * opt.unit_bytes};
  }

  // The state image of `r` after `position` tokens, filed under the hash of the block ending there.
  object_ref state_object(const request& r, int32_t position) const {
    return {{opt.namespace_id, r.hashes[static_cast<size_t>(position / opt.block_size - 1)],
             static_cast<uint8_t>(object_kind::state_image)},
            0, position, opt.units_per_image, static_cast<uint64_t>(opt.units_per_image) * opt.unit_bytes};
  }

  // SPEC C2: the largest point the host tier alone could resume `r` at. A full-prompt hit is
  // first reduced by one token; a hybrid also needs a state image at the point.
  int32_t host_boundary(const request& r, int32_t cpu_tokens) const {
    int32_t usable = std::min(cpu_tokens, static_cast<int32_t>(r.spec.prompt.size()) - 1);
    if (usable <= 0)
      return 0;
    if (!opt.has_recurrent_state)
      return usable / opt.block_size * opt.block_size;
    if ((opt.checkpoint_interval == 0 && !r.peer_lookup) || opt.units_per_image == 0)
      return 0;
    int32_t best = 0;
    for (auto p : r.cpu_state_positions)
      if (p <= usable)
        best = p;
    return best;
  }

  // Orders the loads that resume `r` at its host boundary: every chunk object from the one
  // holding the HBM resume point through the one covering the boundary (the hit is kept whole),
  // into the request's own blocks (blocks shared from the HBM index are skipped), and for a
  // hybrid the state image at the boundary into the units the pool reserved for it.
  void prepare_load(request& r, std::vector<transfer_order>& orders) {
    const int32_t bs = opt.block_size, B = r.cpu_boundary, H = r.num_computed;
    if (B <= H)
      return;
    std::vector<transfer_meta> mine;
    for (const auto& c : r.cpu_chunks) {
      int32_t first = c.first_block * bs, end = (c.first_block + c.num_blocks) * bs;
      if (end <= H || first >= B)
        continue;
      if (static_cast<size_t>(c.first_block + c.num_blocks) > r.block_table.size())
        return; // cannot happen: objects hold full blocks of this prompt
      transfer_meta m;
      m.request_id = r.spec.request_id;
      m.object = kv_object(r, first, end);
      for (int32_t b = c.first_block; b < c.first_block + c.num_blocks; ++b)
        m.units.push_back(b < H / bs ? -1 : r.block_table[static_cast<size_t>(b)]);
      m.boundary = B;
      mine.push_back(std::move(m));
    }
    if (opt.has_recurrent_state) {
      transfer_meta m;
      m.request_id = r.spec.request_id;
      m.object = state_object(r, B);
      m.boundary = B;
      auto img = std::find_if(r.images.begin(), r.images.end(), [&](const reserved_image& i) { return i.position == B; });
      if (img != r.images.end()) { // the loaded image becomes this request's HBM checkpoint at B
        m.units = img->units;
        m.image_hash = img->hash;
        r.images.erase(img);
      } else if (static_cast<int32_t>(r.load_units.size()) == opt.units_per_image) {
        m.units = r.load_units; // another request holds the image at B: private units
      } else {
        return; // no units for the image: the request recomputes from its HBM point
      }
      mine.push_back(std::move(m));
    }
    r.parked = true;
    for (auto& m : mine) {
      orders.push_back({m.request_id, m.object});
      load_meta.push_back(std::move(m));
    }
  }

  // Saves of what a step computes for `r` (SPEC C1, C4): each whole chunk of the prompt the
  // step completes, the prompt's last partial chunk once the prompt is complete, and the state
  // images the step copies at the prompt-end anchor and at a rung at the prompt's end.
  // A "chunk" store (SPEC D2): whole chunks only, and the state images the step copies on the
  // chunk grid up to the prompt's length (the ladder's rungs when checkpoint_interval divides
  // chunk_size), instead of the anchor and the prompt-end rung.
  // A request's saves for the step that computes its tokens [first, end).
  void prepare_saves(request& r, int32_t first, int32_t end, const step_plan& plan,
                     std::vector<transfer_order>& orders) {
    if (!opt.offload || !opt.offload_saves || r.save_failures >= 3)
      return;
    const int32_t bs = opt.block_size, prompt = static_cast<int32_t>(r.spec.prompt.size());
    auto kv_save = [&](int32_t first, int32_t last) {
      transfer_meta m;
      m.request_id = r.spec.request_id;
      m.object = kv_object(r, first, last);
      for (int32_t b = first / bs; b < last / bs; ++b)
        m.units.push_back(r.block_table[static_cast<size_t>(b)]);
      m.boundary = last;
      orders.push_back({m.request_id, m.object});
      save_meta.push_back(std::move(m));
    };
    // NOTE(order): a KV chunk goes out in a step after the one that computes it, so its gather
    // reads units the step leaves alone and runs beside the forward (step_executor); only the step
    // that finishes the prompt saves what it computes (its saves wait for its forward), so a
    // request that finishes there holds no blocks for a later save.
    int32_t reach = end >= prompt ? prompt : std::min(end, first), w = r.save_watermark;
    for (; w + opt.chunk_size <= reach; w += opt.chunk_size)
      kv_save(w, w + opt.chunk_size);
    if (!chunk_store && end >= prompt && prompt / bs * bs > w)
      kv_save(w, prompt / bs * bs);
    int32_t anchor = (prompt - 1) / bs * bs;
    auto saved_image = [&](int32_t position) {
      if (chunk_store)
        return position % opt.chunk_size == 0 && position <= prompt;
      return position == anchor || position == prompt;
    };
    for (const auto& c : plan.checkpoint_copies) {
      if (c.request_id != r.spec.request_id || !saved_image(c.position))
        continue;
      transfer_meta m;
      m.request_id = r.spec.request_id;
      m.object = state_object(r, c.position);
      m.units = c.units;
      orders.push_back({m.request_id, m.object});
      save_meta.push_back(std::move(m));
    }
  }

  // The turn's plan goes out, or the loop goes idle when it has nothing for the device.
  std::optional<step_plan> emit(step_plan plan) {
    if (plan.requests.empty() && plan.loads.empty() && plan.saves.empty()) {
      loop = loop_state::idle;
      return std::nullopt;
    }
    plan.header = {step_stamp.epoch(), step_stamp.next()};
    // NOTE(order): every plan carries every clear issued so far, plans with loads and no
    // forward included, so no load can land in a unit before the unit's clear (SPEC B7).
    plan.clears.swap(pending_clears);
    step_in_flight = plan.header;
    loop = loop_state::awaiting_step;
    // The device advances each request by its scheduled tokens once the step completes.
    for (const auto& sr : plan.requests) {
      auto& r = requests.at(sr.request_id);
      r.num_computed += static_cast<int32_t>(sr.token_ids.size());
      if (sr.first_position < static_cast<int32_t>(r.spec.prompt.size()))
        stats.prompt_tokens_computed +=
            std::min<int32_t>(static_cast<int32_t>(r.spec.prompt.size()), r.num_computed) - sr.first_position;
    }
    return plan;
  }

  // Why a request resumes where it does, in words a user reads in `ordo.reason`, and its class.
  std::pair<resume_reason, std::string> explain(const request& r, int32_t hit_blocks, int32_t max_hit_blocks,
                                                int32_t kv_hit_blocks) const {
    if (opt.has_recurrent_state && opt.checkpoint_interval == 0)
      return {resume_reason::interval_zero,
              "cache.checkpoint_interval = 0 keeps no state checkpoints: a hybrid request resumes at 0"};
    if (opt.has_recurrent_state && max_hit_blocks > 0 && kv_hit_blocks > hit_blocks) {
      std::string at = std::to_string(kv_hit_blocks * opt.block_size);
      if (hit_blocks == 0)
        return {resume_reason::no_checkpoint,
                "hbm holds KV up to token " + at + " but no READY state checkpoint at or below it"};
      return {resume_reason::no_checkpoint, "no READY state checkpoint above token " +
                                                std::to_string(hit_blocks * opt.block_size) +
                                                " (hbm holds KV up to token " + at + ")"};
    }
    if (max_hit_blocks == 0)
      return {resume_reason::short_prompt, "prompt shorter than one full block plus one token: nothing to reuse"};
    if (hit_blocks == max_hit_blocks)
      return {resume_reason::prompt_end, "hbm hit capped at floor_" + std::to_string(opt.block_size) +
                                             "(P - 1): the last prompt token is always recomputed"};
    if (hit_blocks == 0)
      return {resume_reason::cold, "no prefix block of this prompt is cached in hbm"};
    return {resume_reason::block_evicted, "hbm holds the prefix up to token " +
                                              std::to_string(hit_blocks * opt.block_size) + ": block " +
                                              std::to_string(hit_blocks) + " is not cached"};
  }
};

scheduling::scheduling(const scheduler_options& options) : impl_(std::make_unique<impl>(options)) {}
scheduling::~scheduling() = default;

void scheduling::add(const completion_request& spec, double now_ms) {
  auto& d = *impl_;
  ++d.stats.num_requests;
  if (spec.prompt.empty())
    return d.fail(spec.request_id, "prompt is empty");
  if (d.requests.count(spec.request_id))
    return d.fail(spec.request_id, "request id " + std::to_string(spec.request_id) + " is already in flight");
  const auto queued = d.requests.size() - d.running.size();
  if (d.opt.max_waiting > 0 && queued >= static_cast<size_t>(d.opt.max_waiting)) {
    ++d.stats.num_rejected;
    d.outbox.failures.push_back({spec.request_id,
                                 "the node has " + std::to_string(queued) + " requests waiting (scheduler.max_waiting = " +
                                     std::to_string(d.opt.max_waiting) + "); retry later",
                                 "rate_limit_error"});
    return;
  }
  int32_t len = static_cast<int32_t>(spec.prompt.size()) + std::max(spec.max_tokens, 0);
  if (ceil_div(len, d.opt.block_size) > d.opt.num_blocks)
    return d.fail(spec.request_id, "prompt plus max_tokens needs " + std::to_string(ceil_div(len, d.opt.block_size)) +
                                       " blocks but the pool has " + std::to_string(d.opt.num_blocks));
  impl::request r;
  r.spec = spec;
  r.tokens = spec.prompt;
  r.root = prefix_root(d.opt.namespace_id, spec.cache_salt);
  r.arrival_ms = now_ms;
  d.requests.emplace(spec.request_id, std::move(r));
  d.outbox.lookups.push_back(
      {spec.request_id, {}, static_cast<int32_t>(spec.prompt.size()), spec.kv_peer, spec.kv_transfer_id});
  auto& stored = d.requests.at(spec.request_id);
  d.ensure_hashes(stored, stored.tokens.size());
  d.outbox.lookups.back().hashes = stored.hashes;
}

void scheduling::on_lookup_done(const connector_lookup_done& done) {
  auto& d = *impl_;
  d.chunk_store = chunk_granularity(done.granularity);
  auto it = d.requests.find(done.request_id);
  if (it == d.requests.end() || it->second.state != request_state::looking_up)
    return;
  auto& r = it->second;
  r.cpu_tokens = done.cpu_tokens;
  r.store_tokens = done.store_tokens;
  r.cpu_chunks = done.cpu_chunks;
  r.cpu_state_positions = done.cpu_state_positions;
  r.peer_lookup = done.from_peer;
  if (d.opt.offload && d.opt.offload_loads)
    r.cpu_boundary = d.host_boundary(r, done.cpu_tokens);
  if (r.peer_lookup && r.cpu_boundary == 0)
    ++d.stats.pd_pulls_missed; // nothing usable at the prefill node: computed here
  // Whole chunks already stored (here, not at a peer) need no save.
  for (const auto& c : done.cpu_chunks) {
    if (r.peer_lookup)
      break;
    if (c.first_block * d.opt.block_size != r.save_watermark || c.num_blocks * d.opt.block_size != d.opt.chunk_size)
      break;
    r.save_watermark += d.opt.chunk_size;
  }
  it->second.state = request_state::waiting;
  d.waiting.push_back(done.request_id);
}

void scheduling::cancel(uint64_t request_id) { impl_->cancels_pending.push_back(request_id); }

void scheduling::request_evict(const evict_request& request) {
  // "cpu" (in process) and "store" (a store server) name the host tier: the connector evicts it.
  (request.tier != "hbm" ? impl_->cpu_evicts_pending : impl_->evicts_pending).push_back(request);
}

bool scheduling::has_work() const {
  const auto& d = *impl_;
  return !d.running.empty() || !d.waiting.empty() || !d.evicts_pending.empty() || !d.to_release.empty() ||
         !d.cancels_pending.empty() ||
         !d.pending_ready.empty() || !d.pending_unpins.empty() || !d.pending_commits.empty() ||
         !d.pending_finished.empty() || !d.cpu_evicts_pending.empty() || !d.pending_aborts.empty() ||
         !d.pending_leases.empty();
}

bool scheduling::idle() const { return impl_->loop == loop_state::idle; }

std::optional<pool_step> scheduling::next_pool_step() {
  auto& d = *impl_;
  if (d.loop != loop_state::idle || !has_work())
    return std::nullopt;
  d.apply_cancels();
  if (!has_work())
    return std::nullopt;
  pool_step step;
  step.header = {d.pool_stamp.epoch(), d.pool_stamp.next()};
  step.images_ready.swap(d.pending_ready);
  step.unpins.swap(d.pending_unpins);
  step.image_aborts.swap(d.pending_aborts);
  step.commits.swap(d.pending_commits);
  step.releases.swap(d.to_release);
  step.evict_hbm = !d.evicts_pending.empty();
  d.evicts_in_flight.swap(d.evicts_pending);
  // Running requests first: each must hold a block for every token it computes next.
  int32_t budget_blocks = d.stats.num_available_blocks;
  for (auto id : d.running) {
    auto& r = d.requests.at(id);
    d.commits_for(r, step.commits);
    int32_t want = ceil_div(static_cast<int32_t>(r.tokens.size()), d.opt.block_size);
    if (want > static_cast<int32_t>(r.block_table.size())) {
      block_grow g;
      g.request_id = id;
      g.total_blocks = want;
      step.grows.push_back(std::move(g));
      budget_blocks -= want - static_cast<int32_t>(r.block_table.size());
    }
  }
  // Then admissions, oldest first, while sequences, state slots and blocks (as of the last
  // pool reply) last. A refusal is harmless: the pool answers it and the request waits.
  int32_t seqs = static_cast<int32_t>(d.running.size());
  int32_t slots = static_cast<int32_t>(d.free_slots.size());
  for (auto id : d.waiting) {
    if (seqs >= d.opt.max_num_seqs || (d.opt.has_recurrent_state && slots == 0))
      break;
    auto& r = d.requests.at(id);
    int32_t want = ceil_div(static_cast<int32_t>(r.tokens.size()), d.opt.block_size);
    // NOTE(no-stall): with nothing running the head is always tried: the pool either admits it
    // or proves it can never fit (then it fails instead of waiting forever).
    bool must_try = d.running.empty() && step.grows.empty();
    if (want > budget_blocks && !must_try)
      break;
    d.ensure_hashes(r, r.tokens.size());
    block_grow g;
    g.request_id = id;
    g.total_blocks = want;
    // SPEC B2: never cover the last prompt token.
    g.max_hit_blocks = (static_cast<int32_t>(r.tokens.size()) - 1) / d.opt.block_size;
    g.hashes.assign(r.hashes.begin(), r.hashes.begin() + std::min<size_t>(r.hashes.size(), g.max_hit_blocks));
    if (d.opt.has_recurrent_state) {
      g.needs_state = true;
      if (d.opt.checkpoint_interval == 0)
        g.max_hit_blocks = 0;
      g.units_per_image = d.opt.units_per_image;
      // P/D: the decode node resumes at the prompt-end anchor, so a prefill keeps it even when
      // this node keeps no checkpoints for itself.
      const int32_t interval =
          d.opt.checkpoint_interval == 0 && d.opt.pd && r.spec.remote_decode ? -1 : d.opt.checkpoint_interval;
      if (d.opt.units_per_image > 0)
        for (auto p : checkpoint_positions(static_cast<int32_t>(r.spec.prompt.size()), d.opt.block_size, interval))
          g.checkpoints.push_back({p, r.hashes[static_cast<size_t>(p / d.opt.block_size) - 1]});
      // Units for the state image a host-tier load would bring (becomes an HBM checkpoint, or
      // lands in private units when another request already copies an image there).
      int32_t b = r.cpu_boundary;
      if (d.opt.units_per_image > 0 && b > 0)
        g.load_image_position = b;
      if (d.opt.units_per_image > 0 && b > 0 &&
          std::none_of(g.checkpoints.begin(), g.checkpoints.end(), [&](const checkpoint_position& c) { return c.position == b; })) {
        g.checkpoints.push_back({b, r.hashes[static_cast<size_t>(b / d.opt.block_size) - 1]});
        std::sort(g.checkpoints.begin(), g.checkpoints.end(),
                  [](const checkpoint_position& x, const checkpoint_position& y) { return x.position < y.position; });
      }
      want += static_cast<int32_t>(g.checkpoints.size()) * d.opt.units_per_image;
      if (want > budget_blocks && !must_try)
        break;
    }
    step.grows.push_back(std::move(g));
    ++seqs;
    --slots;
    budget_blocks -= want;
  }
  d.pool_in_flight = step;
  d.loop = loop_state::awaiting_pool;
  return step;
}

std::optional<step_plan> scheduling::on_pool_step_done(const pool_step_done& done) {
  auto& d = *impl_;
  if (d.loop != loop_state::awaiting_pool || !(done.header == d.pool_in_flight.header))
    throw std::logic_error("pool_step_done (" + std::to_string(done.header.epoch) + ", " +
                           std::to_string(done.header.seq) + ") does not answer the pool step in flight");
  if (done.results.size() != d.pool_in_flight.grows.size())
    throw std::logic_error("pool_step_done carries " + std::to_string(done.results.size()) + " results for " +
                           std::to_string(d.pool_in_flight.grows.size()) + " grows");
  d.stats.num_free_blocks = done.num_free;
  d.stats.num_cached_blocks = done.num_cached;
  d.stats.num_available_blocks = done.num_available;
  d.stats.checkpoints_evicted += done.num_images_evicted;
  d.stats.num_images = done.num_images;
  d.pending_clears.insert(d.pending_clears.end(), done.clears.begin(), done.clears.end());
  for (auto& e : d.evicts_in_flight)
    d.outbox.evictions.push_back({e.request_id, e.tier, done.num_evicted});
  d.evicts_in_flight.clear();

  bool admissions_blocked = false;
  std::vector<transfer_order> loads, saves;
  d.load_meta.clear();
  d.save_meta.clear();
  for (size_t i = 0; i < done.results.size(); ++i) {
    const auto& res = done.results[i];
    const auto& grow = d.pool_in_flight.grows[i];
    auto& r = d.requests.at(res.request_id);
    if (r.state == request_state::running) {
      if (res.ok)
        r.block_table = res.block_table;
      else
        d.preempt(r); // out of blocks: give them back, recompute later
      continue;
    }
    // An admission.
    bool alone = d.running.empty() && !admissions_blocked && i == 0;
    if (!res.ok && alone) {
      // Nothing else holds blocks or images: this request can never fit.
      d.waiting.erase(std::find(d.waiting.begin(), d.waiting.end(), res.request_id));
      d.fail(res.request_id, "prompt of " + std::to_string(r.tokens.size()) + " tokens needs " +
                                 std::to_string(grow.total_blocks) + " blocks plus " +
                                 std::to_string(grow.checkpoints.size()) + " state checkpoints of " +
                                 std::to_string(grow.units_per_image) + " units; the pool has " +
                                 std::to_string(d.opt.num_blocks) + " blocks");
      admissions_blocked = true;
      continue;
    }
    if (!res.ok || admissions_blocked) {
      if (res.ok) // admitted by the pool after an earlier refusal: keep FIFO order, give it back
        d.to_release.push_back(res.request_id);
      admissions_blocked = true;
      continue;
    }
    d.waiting.erase(std::find(d.waiting.begin(), d.waiting.end(), res.request_id));
    r.state = request_state::running;
    r.order = d.next_order++;
    r.block_table = res.block_table;
    r.num_computed = res.num_hit_blocks * d.opt.block_size;
    r.num_committed_blocks = res.num_hit_blocks;
    if (d.opt.has_recurrent_state) {
      r.state_slot = d.free_slots.back();
      d.free_slots.pop_back();
      r.needs_reset = res.restore_hash == 0;
      r.restore_hash = res.restore_hash;
      r.restore_units = res.restore_units;
      r.images = res.reserved;
      r.load_units = res.load_units;
      std::sort(r.images.begin(), r.images.end(),
                [](const reserved_image& a, const reserved_image& b) { return a.position < b.position; });
    }
    if (!r.admitted_once) {
      r.admitted_once = true;
      r.resume_at = r.num_computed;
      r.from_hbm = r.num_computed;
      std::tie(r.reason_kind, r.reason) = d.explain(r, res.num_hit_blocks, grow.max_hit_blocks, res.kv_hit_blocks);
      d.stats.prompt_tokens += static_cast<int64_t>(r.spec.prompt.size());
      d.stats.prompt_tokens_from_hbm += r.from_hbm;
    }
    if (d.opt.offload && d.opt.offload_loads)
      d.prepare_load(r, loads);
    d.running.push_back(res.request_id);
  }
  d.running.erase(std::remove_if(d.running.begin(), d.running.end(),
                                 [&](uint64_t id) { return d.requests.at(id).state != request_state::running; }),
                  d.running.end());

  // Chunked prefill and decode under the token budget, oldest request first.
  step_plan plan;
  int32_t budget = d.opt.max_batch_tokens;
  d.step_requests.clear();
  for (auto id : d.running) {
    if (budget == 0)
      break;
    auto& r = d.requests.at(id);
    if (r.parked)
      continue; // its loads go first; its forward starts in the next step
    int32_t remaining = static_cast<int32_t>(r.tokens.size()) - r.num_computed;
    int32_t n = std::min(remaining, budget);
    if (n <= 0)
      continue;
    // SPEC B4: cut the chunk at the next checkpoint position, copy the state there after the
    // forward; the image is READY once this step completes.
    while (!r.images.empty() && r.images.front().position <= r.num_computed)
      r.images.erase(r.images.begin()); // unreachable: below the resume point
    if (!r.images.empty() && r.images.front().position <= r.num_computed + n) {
      const auto& img = r.images.front();
      n = img.position - r.num_computed;
      plan.checkpoint_copies.push_back({id, r.state_slot, img.position, img.units});
      d.step_ready.push_back(img.hash);
      r.images.erase(r.images.begin());
    }
    if (r.restore_hash) {
      plan.restores.push_back({id, r.state_slot, r.num_computed, r.restore_units});
      d.step_unpins.push_back({id, r.restore_hash});
      ++d.stats.checkpoints_restored;
      r.restore_hash = 0;
      r.restore_units.clear();
    }
    scheduled_request s;
    s.request_id = id;
    s.state_slot = r.state_slot;
    s.reset_state = r.needs_reset;
    s.first_position = r.num_computed;
    s.token_ids.assign(r.tokens.begin() + r.num_computed, r.tokens.begin() + r.num_computed + n);
    s.block_table = r.block_table;
    s.sample = n == remaining;
    s.temperature = r.spec.temperature;
    s.seed = r.spec.seed;
    r.needs_reset = false;
    budget -= n;
    plan.requests.push_back(std::move(s));
    d.step_requests.push_back(id);
  }
  d.stats.num_waiting = static_cast<int32_t>(d.waiting.size());
  d.stats.num_running = static_cast<int32_t>(d.running.size());
  for (const auto& sr : plan.requests)
    d.prepare_saves(d.requests.at(sr.request_id), sr.first_position,
                    sr.first_position + static_cast<int32_t>(sr.token_ids.size()), plan,
                    saves);
  if (loads.empty() && saves.empty() && d.pending_finished.empty() && d.cpu_evicts_pending.empty() &&
      d.pending_leases.empty())
    return d.emit(std::move(plan));
  connector_step cs;
  cs.header = {d.connector_stamp.epoch(), d.connector_stamp.next()};
  // An eviction of the host tier runs before this step's pins and reserves.
  cs.evict_all = !d.cpu_evicts_pending.empty();
  d.cpu_evicts_in_flight.swap(d.cpu_evicts_pending);
  cs.finished.swap(d.pending_finished);
  cs.leases.swap(d.pending_leases);
  cs.loads = std::move(loads);
  cs.saves = std::move(saves);
  d.connector_in_flight = cs;
  d.connector_to_send = std::move(cs);
  d.plan_in_progress = std::move(plan);
  d.loop = loop_state::awaiting_connector;
  return std::nullopt;
}

std::optional<connector_step> scheduling::take_connector_step() {
  auto& d = *impl_;
  std::optional<connector_step> out;
  out.swap(d.connector_to_send);
  return out;
}

std::optional<step_plan> scheduling::on_connector_step_done(const connector_step_done& done) {
  auto& d = *impl_;
  if (d.loop != loop_state::awaiting_connector || !(done.header == d.connector_in_flight.header))
    throw std::logic_error("connector_step_done (" + std::to_string(done.header.epoch) + ", " +
                           std::to_string(done.header.seq) + ") does not answer the connector step in flight");
  if (done.loads.size() != d.load_meta.size() || done.saves.size() != d.save_meta.size())
    throw std::logic_error("connector_step_done answers " + std::to_string(done.loads.size()) + " loads and " +
                           std::to_string(done.saves.size()) + " saves for " + std::to_string(d.load_meta.size()) +
                           " and " + std::to_string(d.save_meta.size()));
  d.stats.store = done.stats;
  d.chunk_store = chunk_granularity(done.granularity);
  for (auto& e : d.cpu_evicts_in_flight)
    d.outbox.evictions.push_back({e.request_id, e.tier, done.num_evicted});
  d.cpu_evicts_in_flight.clear();
  // P/D prefill: the held results go out now that their objects are committed and leased.
  for (size_t i = 0; i < d.connector_in_flight.leases.size(); ++i) {
    auto held = d.held_results.find(d.connector_in_flight.leases[i].request_id);
    if (held == d.held_results.end())
      continue;
    if (i < done.leases.size()) {
      held->second.lease_objects = done.leases[i].num_objects;
      held->second.lease_ms = done.leases[i].lease_ms;
    }
    d.outbox.results.push_back(std::move(held->second));
    d.held_results.erase(held);
  }
  step_plan plan = std::move(d.plan_in_progress);
  const int32_t bs = d.opt.block_size;

  // Loads: a request's orders are contiguous; all of them granted or none is issued (SPEC C5).
  for (size_t i = 0; i < d.load_meta.size();) {
    size_t j = i;
    while (j < d.load_meta.size() && d.load_meta[j].request_id == d.load_meta[i].request_id)
      ++j;
    auto& r = d.requests.at(d.load_meta[i].request_id);
    const int32_t H = r.num_computed, B = d.load_meta[i].boundary;
    const transfer_grant* refused = nullptr;
    for (size_t k = i; k < j; ++k)
      if (!done.loads[k].ok && !refused)
        refused = &done.loads[k];
    r.parked = false;
    if (r.peer_lookup)
      ++(refused ? d.stats.pd_pulls_failed : d.stats.pd_pulls_ok);
    if (!refused) {
      int32_t loaded_end = H;
      impl::resume_undo undo{H, r.restore_hash, r.restore_units, r.needs_reset, B, 0, {}, 0};
      bool checked = false;
      for (size_t k = i; k < j; ++k) {
        const auto& m = d.load_meta[k];
        const auto& g = done.loads[k];
        plan.loads.push_back({r.spec.request_id, m.object.key.kind, g.data_offset, g.data_bytes, m.units});
        d.step_finished.push_back({r.spec.request_id, m.object.key, false, true});
        const bool kv = m.object.key.kind == static_cast<uint8_t>(object_kind::kv_chunk);
        d.step_load_checks.push_back(
            {r.spec.request_id, d.step_finished.size() - 1, g.summed, g.checksum, kv ? m.object.first_token : -1});
        checked = checked || g.summed;
        if (m.image_hash) {
          undo.image_hash = m.image_hash;
          undo.image_units = m.units;
        }
        ++d.stats.loads_total;
        d.stats.bytes_loaded += static_cast<int64_t>(g.data_bytes);
        if (m.object.key.kind == static_cast<uint8_t>(object_kind::state_image)) {
          plan.restores.push_back({r.spec.request_id, r.state_slot, B, m.units});
          if (m.image_hash)
            d.step_ready.push_back(m.image_hash); // the loaded image is an HBM checkpoint too
        } else {
          loaded_end = std::max(loaded_end, m.object.first_token + m.object.tokens);
        }
      }
      if (r.restore_hash) { // the HBM image at H is not needed any more
        d.step_unpins.push_back({r.spec.request_id, r.restore_hash});
        r.restore_hash = 0;
        r.restore_units.clear();
      }
      r.needs_reset = false;
      r.num_computed = B;
      r.parked = true;
      // Images reserved below B will never be copied: their units go back now.
      for (auto img = r.images.begin(); img != r.images.end();) {
        if (img->position >= B) {
          ++img;
          continue;
        }
        d.pending_aborts.push_back({r.spec.request_id, img->hash});
        img = r.images.erase(img);
      }
      d.step_parked.push_back(r.spec.request_id);
      if (r.num_preemptions == 0)
        undo.loaded = loaded_end - H;
      if (checked)
        d.step_undo[r.spec.request_id] = std::move(undo);
      if (r.num_preemptions == 0) {
        const int32_t loaded = loaded_end - H;
        (r.peer_lookup ? r.from_peer : d.opt.host_tier_is_store ? r.from_store : r.from_cpu) = loaded;
        (d.opt.host_tier_is_store && !r.peer_lookup ? d.stats.prompt_tokens_from_store
                                                    : d.stats.prompt_tokens_from_cpu) += loaded;
        r.resume_at = B;
        r.reason_kind = resume_reason::host_tier;
        r.reason = d.opt.has_recurrent_state
                       ? d.tier_name(r) + " holds KV up to token " + std::to_string(r.cpu_tokens) +
                             " and a state image at " + std::to_string(B) + " (the largest at or below floor_" +
                             std::to_string(bs) + "(P - 1))"
                       : d.tier_name(r) + " holds KV up to token " + std::to_string(r.cpu_tokens) + "; resumed at floor_" +
                             std::to_string(bs) + "(min(that, P - 1))";
      }
    } else {
      int32_t lowest = B;
      for (size_t k = i; k < j; ++k) {
        const auto& m = d.load_meta[k];
        if (done.loads[k].ok)
          d.pending_finished.push_back({r.spec.request_id, m.object.key, false, true}); // unpin, never issued
        else {
          ++d.stats.load_failures_total;
          if (m.object.key.kind == static_cast<uint8_t>(object_kind::kv_chunk))
            lowest = std::min(lowest, m.object.first_token);
        }
        if (m.image_hash) { // the reserved units still take the image when the forward reaches B
          r.images.push_back({B, m.image_hash, m.units});
          std::sort(r.images.begin(), r.images.end(),
                    [](const reserved_image& a, const reserved_image& b) { return a.position < b.position; });
        }
      }
      // SPEC C5: recompute from the last secured point, and store the recomputed chunks again.
      r.save_watermark = std::min(r.save_watermark, lowest / d.opt.chunk_size * d.opt.chunk_size);
      if (r.num_preemptions == 0) {
        r.reason_kind = resume_reason::host_load_failed;
        r.reason = d.tier_name(r) + " load failed (" + refused->status + "): recomputed from token " + std::to_string(H);
      }
    }
    i = j;
  }

  // Saves: granted ones run in this step; "exists" means the bytes are stored already.
  for (size_t k = 0; k < d.save_meta.size(); ++k) {
    const auto& m = d.save_meta[k];
    const auto& g = done.saves[k];
    auto it = d.requests.find(m.request_id);
    if (it == d.requests.end())
      continue;
    auto& r = it->second;
    bool kv = m.object.key.kind == static_cast<uint8_t>(object_kind::kv_chunk);
    bool stored = g.ok || g.status == "exists";
    if (g.ok) {
      plan.saves.push_back({m.request_id, m.object.key.kind, g.data_offset, g.data_bytes, m.units});
      d.step_save_finished.push_back(d.step_finished.size());
      for (uint64_t copy : g.copies) { // a multi connector's other leaves (SPEC E3: saves fan out)
        plan.saves.push_back({m.request_id, m.object.key.kind, copy, g.data_bytes, m.units});
        d.step_save_finished.push_back(SIZE_MAX);
      }
      d.step_finished.push_back({m.request_id, m.object.key, true, true});
      ++d.stats.saves_total;
      d.stats.bytes_saved += static_cast<int64_t>(g.data_bytes);
    } else if (!stored) {
      ++d.stats.save_failures_total;
    }
    if (kv && m.object.first_token == r.save_watermark) {
      if (stored) {
        r.save_watermark = m.boundary;
        r.save_failures = 0;
      } else {
        ++r.save_failures; // the watermark stays: the next step asks again, 3 attempts at most
      }
    }
  }
  return d.emit(std::move(plan));
}

void scheduling::on_step_done(const step_done& done, double now_ms) {
  auto& d = *impl_;
  if (d.loop != loop_state::awaiting_step || !(done.header == d.step_in_flight))
    throw std::logic_error("step_done (" + std::to_string(done.header.epoch) + ", " +
                           std::to_string(done.header.seq) + ") does not answer the step in flight");
  ++d.stats.num_steps;
  d.loop = loop_state::idle;
  // First: an undone resume takes back its image's READY and its HBM image's unpin from this step.
  d.check_loads(done);
  d.stats.checkpoints_kept += static_cast<int64_t>(d.step_ready.size());
  d.pending_ready.insert(d.pending_ready.end(), d.step_ready.begin(), d.step_ready.end());
  d.pending_unpins.insert(d.pending_unpins.end(), d.step_unpins.begin(), d.step_unpins.end());
  d.step_ready.clear();
  d.step_unpins.clear();
  // The gathers' checksums go with the commits (the store then does not hash the saved bytes).
  if (done.save_checksums.size() == d.step_save_finished.size())
    for (size_t k = 0; k < done.save_checksums.size(); ++k)
      if (d.step_save_finished[k] != SIZE_MAX) {
        auto& f = d.step_finished[d.step_save_finished[k]];
        f.summed = true;
        f.checksum = done.save_checksums[k];
      }
  d.step_save_finished.clear();
  d.pending_finished.insert(d.pending_finished.end(), d.step_finished.begin(), d.step_finished.end());
  d.step_finished.clear();
  for (auto id : d.step_parked)
    if (auto it = d.requests.find(id); it != d.requests.end())
      it->second.parked = false;
  d.step_parked.clear();
  for (const auto& s : done.samples) {
    auto it = d.requests.find(s.request_id);
    if (it == d.requests.end())
      continue;
    auto& r = it->second;
    r.digest = chain_digest(r.digest, s.logits_digest);
    ++d.stats.generation_tokens;
    if (r.last_token_ms == 0)
      r.first_token_ms = now_ms - r.arrival_ms;
    else
      r.inter_token_ms.push_back(static_cast<float>(now_ms - r.last_token_ms));
    r.last_token_ms = now_ms;
    if (std::find(d.opt.eos_ids.begin(), d.opt.eos_ids.end(), s.token_id) != d.opt.eos_ids.end()) {
      d.stream_until(r, r.generated.size());
      d.finish(r, "stop", now_ms);
      continue;
    }
    r.tokens.push_back(s.token_id);
    r.generated.push_back(s.token_id);
    size_t matched = 0;
    size_t hold = impl::stop_holdback(r, matched);
    if (matched > 0) { // OpenAI: the stop sequence is not part of the output
      r.generated.resize(r.generated.size() - matched);
      d.stream_until(r, r.generated.size());
      d.finish(r, "stop", now_ms);
      continue;
    }
    if (static_cast<int32_t>(r.generated.size()) >= r.spec.max_tokens) {
      d.stream_until(r, r.generated.size());
      d.finish(r, "length", now_ms);
      continue;
    }
    d.stream_until(r, r.generated.size() - hold);
  }
  d.running.erase(std::remove_if(d.running.begin(), d.running.end(),
                                 [&](uint64_t id) { return d.requests.count(id) == 0; }),
                  d.running.end());
  d.stats.num_running = static_cast<int32_t>(d.running.size());
}

scheduler_outbox scheduling::take_outbox() {
  scheduler_outbox out;
  std::swap(out, impl_->outbox);
  return out;
}

const scheduler_stats& scheduling::stats() const { return impl_->stats; }

} // namespace ordo
