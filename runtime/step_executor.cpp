#include "runtime/step_executor.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <xxhash.h>

#include "kernels/kernel_table.hpp"
#include "kernels/object_checksum.hpp"
#include "messages/store.hpp"
#include "runtime/kv_codec.hpp"

namespace ordo {

namespace {

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

} // namespace

// Input arrays live at fixed offsets sized by capacity, so a buffer always holds values that
// were valid for some step (a missing edge reads stale inputs, never out-of-range ones).
struct step_executor::impl {
  device& dev;
  model& mdl;
  step_executor_options opt;
  int32_t block_size;
  int32_t vocab;
  int32_t max_table;
  size_t off_token_ids, off_positions, off_token_req, off_slot_mapping, off_req_token_start,
      off_req_first_position, off_req_block_table_start, off_block_tables, off_req_state_slot,
      off_req_reset_state, off_sample_rows, off_sample_temperature, off_sample_seed, off_transfer_units,
      off_transfer_sums, input_bytes;
  size_t max_transfer_units;
  uint8_t* staging = nullptr; // pinned host
  uint8_t* inputs = nullptr;  // device
  float* host_logits = nullptr;
  int32_t* host_tokens = nullptr;
  uint64_t* host_sums = nullptr; // the transfers' checksum sums, downloaded with the outputs
  bool sum_transfers = false;    // gathers and scatters sum each object's checksum (block_bytes % 8 == 0)

  page_units units;
  std::unique_ptr<kernel_table> table;          // for the transfers' gathers and scatters
  std::unique_ptr<unit_copy_fields> copy_fields; // only with a host arena

  impl(device& d, model& m, const step_executor_options& o)
      : dev(d), mdl(m), opt(o), block_size(m.options().block_size), vocab(m.geometry().vocab_size),
        max_table(m.options().num_blocks), units(m.kv_fields(), m.state_slots()) {
    size_t T = static_cast<size_t>(opt.max_batch_tokens), R = static_cast<size_t>(opt.max_num_seqs);
    size_t at = 0;
    auto take = [&](size_t bytes) { size_t here = at; at = align8(at + bytes); return here; };
    off_token_ids = take(4 * T);
    off_positions = take(4 * T);
    off_token_req = take(4 * T);
    off_slot_mapping = take(4 * T);
    off_req_token_start = take(4 * (R + 1));
    off_req_first_position = take(4 * R);
    off_req_block_table_start = take(4 * (R + 1));
    off_block_tables = take(4 * R * static_cast<size_t>(max_table));
    off_req_state_slot = take(4 * R);
    off_req_reset_state = take(4 * R);
    off_sample_rows = take(4 * R);
    off_sample_temperature = take(4 * R);
    off_sample_seed = take(8 * R);
    // Unit ids of the step's loads and saves: every block and image unit of the arena, twice
    // (a block can be loaded and saved in one step).
    max_transfer_units = 2 * static_cast<size_t>(max_table);
    off_transfer_units = take(4 * max_transfer_units);
    // One checksum sum per transfer (at most one per unit), zeroed by each step's upload.
    off_transfer_sums = take(8 * max_transfer_units);
    input_bytes = at;
    staging = static_cast<uint8_t*>(dev.alloc_host_pinned(input_bytes));
    inputs = static_cast<uint8_t*>(dev.alloc_device(input_bytes));
    host_logits = static_cast<float*>(dev.alloc_host_pinned(4 * R * static_cast<size_t>(vocab)));
    host_tokens = static_cast<int32_t*>(dev.alloc_host_pinned(4 * R));
    if (opt.host_arena) {
      table = make_kernel_table(dev);
      copy_fields = std::make_unique<unit_copy_fields>(m.kv_fields(), dev);
      sum_transfers = step_executor::sums_transfers(m.kv_fields());
      host_sums = static_cast<uint64_t*>(dev.alloc_host_pinned(8 * max_transfer_units));
    }
  }

  ~impl() {
    dev.synchronize();
    dev.free_host_pinned(staging);
    dev.free_device(inputs);
    dev.free_host_pinned(host_logits);
    dev.free_host_pinned(host_tokens);
    if (host_sums)
      dev.free_host_pinned(host_sums);
  }

  template <class T>
  T* host_at(size_t off) { return reinterpret_cast<T*>(staging + off); }
  template <class T>
  const T* dev_at(size_t off) { return reinterpret_cast<const T*>(inputs + off); }

  void validate(const step_plan& plan) {
    if (plan.requests.size() > static_cast<size_t>(opt.max_num_seqs))
      throw std::invalid_argument("step_plan has " + std::to_string(plan.requests.size()) +
                                  " requests; the runner holds at most " + std::to_string(opt.max_num_seqs));
    size_t tokens = 0;
    for (const auto& r : plan.requests) {
      if (r.token_ids.empty())
        throw std::invalid_argument("step_plan request " + std::to_string(r.request_id) + " has no tokens");
      tokens += r.token_ids.size();
      int32_t last = r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1;
      if (r.first_position < 0 || static_cast<size_t>(last / block_size) >= r.block_table.size())
        throw std::invalid_argument("step_plan request " + std::to_string(r.request_id) + ": block table of " +
                                    std::to_string(r.block_table.size()) + " blocks does not cover position " +
                                    std::to_string(last));
      if (r.block_table.size() > static_cast<size_t>(max_table))
        throw std::invalid_argument("step_plan request " + std::to_string(r.request_id) + " holds more blocks than exist");
      for (auto b : r.block_table)
        if (b < 0 || b >= max_table)
          throw std::invalid_argument("step_plan request " + std::to_string(r.request_id) + " names block " +
                                      std::to_string(b));
      for (auto t : r.token_ids)
        if (t < 0 || t >= vocab)
          throw std::invalid_argument("step_plan request " + std::to_string(r.request_id) + " has token " +
                                      std::to_string(t) + " outside the vocabulary");
    }
    auto check_image = [&](const state_image_copy& c, const char* what) {
      if (c.state_slot < 0 || c.state_slot >= mdl.state_slots().num_slots)
        throw std::invalid_argument(std::string(what) + " of request " + std::to_string(c.request_id) +
                                    " names state slot " + std::to_string(c.state_slot));
      if (static_cast<int32_t>(c.units.size()) != units.units_per_image())
        throw std::invalid_argument(std::string(what) + " of request " + std::to_string(c.request_id) + " has " +
                                    std::to_string(c.units.size()) + " units; an image takes " +
                                    std::to_string(units.units_per_image()));
      for (auto u : c.units)
        if (u < 0 || u >= max_table)
          throw std::invalid_argument(std::string(what) + " names unit " + std::to_string(u));
    };
    for (const auto& c : plan.restores)
      check_image(c, "restore");
    for (const auto& c : plan.checkpoint_copies)
      check_image(c, "checkpoint copy");
    for (auto u : plan.clears)
      if (u < 0 || u >= max_table)
        throw std::invalid_argument("clear names unit " + std::to_string(u));
    size_t transfer_units = 0;
    auto check_transfer = [&](const unit_transfer& t, const char* what) {
      std::string who = std::string(what) + " of request " + std::to_string(t.request_id);
      if (!opt.host_arena)
        throw std::invalid_argument(who + ": this runner has no host tier");
      bool state = t.kind == static_cast<uint8_t>(object_kind::state_image);
      if (!state && t.kind != static_cast<uint8_t>(object_kind::kv_chunk))
        throw std::invalid_argument(who + ": unknown object kind " + std::to_string(t.kind));
      if (state && static_cast<int32_t>(t.units.size()) != units.units_per_image())
        throw std::invalid_argument(who + " has " + std::to_string(t.units.size()) + " units; an image takes " +
                                    std::to_string(units.units_per_image()));
      for (auto u : t.units)
        if (u >= max_table || (u < 0 && (state || u != -1)))
          throw std::invalid_argument(who + " names unit " + std::to_string(u));
      if (t.data_bytes != t.units.size() * copy_fields->unit_bytes() || t.data_offset > opt.host_arena_bytes ||
          t.data_bytes > opt.host_arena_bytes - t.data_offset)
        throw std::invalid_argument(who + ": " + std::to_string(t.data_bytes) + " bytes at " +
                                    std::to_string(t.data_offset) + " do not fit the host arena or its " +
                                    std::to_string(t.units.size()) + " units");
      transfer_units += t.units.size();
    };
    for (const auto& t : plan.loads)
      check_transfer(t, "load");
    for (const auto& t : plan.saves)
      check_transfer(t, "save");
    if (transfer_units > max_transfer_units || plan.loads.size() + plan.saves.size() > max_transfer_units)
      throw std::invalid_argument("step_plan moves " + std::to_string(transfer_units) + " units; at most " +
                                  std::to_string(max_transfer_units));
    if (tokens > static_cast<size_t>(opt.max_batch_tokens))
      throw std::invalid_argument("step_plan has " + std::to_string(tokens) + " tokens; max_batch_tokens is " +
                                  std::to_string(opt.max_batch_tokens));
  }

  device_batch pack(const step_plan& plan) {
    device_batch b;
    int32_t row = 0, table = 0, samples = 0, max_position = -1;
    auto* token_ids = host_at<int32_t>(off_token_ids);
    auto* positions = host_at<int32_t>(off_positions);
    auto* token_req = host_at<int32_t>(off_token_req);
    auto* slot_mapping = host_at<int32_t>(off_slot_mapping);
    auto* req_token_start = host_at<int32_t>(off_req_token_start);
    auto* req_first_position = host_at<int32_t>(off_req_first_position);
    auto* req_block_table_start = host_at<int32_t>(off_req_block_table_start);
    auto* block_tables = host_at<int32_t>(off_block_tables);
    auto* req_state_slot = host_at<int32_t>(off_req_state_slot);
    auto* req_reset_state = host_at<int32_t>(off_req_reset_state);
    auto* sample_rows = host_at<int32_t>(off_sample_rows);
    auto* sample_temperature = host_at<float>(off_sample_temperature);
    auto* sample_seed = host_at<uint64_t>(off_sample_seed);
    for (size_t i = 0; i < plan.requests.size(); ++i) {
      const auto& r = plan.requests[i];
      req_token_start[i] = row;
      req_first_position[i] = r.first_position;
      req_block_table_start[i] = table;
      req_state_slot[i] = r.state_slot;
      req_reset_state[i] = r.reset_state ? 1 : 0;
      for (auto blk : r.block_table)
        block_tables[table++] = blk;
      for (size_t k = 0; k < r.token_ids.size(); ++k, ++row) {
        int32_t pos = r.first_position + static_cast<int32_t>(k);
        token_ids[row] = r.token_ids[k];
        positions[row] = pos;
        max_position = std::max(max_position, pos);
        token_req[row] = static_cast<int32_t>(i);
        slot_mapping[row] = r.block_table[static_cast<size_t>(pos / block_size)] * block_size + pos % block_size;
      }
      if (r.sample) {
        sample_rows[samples] = row - 1;
        sample_temperature[samples] = r.temperature;
        sample_seed[samples] = r.seed;
        ++samples;
      }
    }
    auto* transfer_units = host_at<int32_t>(off_transfer_units);
    size_t at = 0;
    for (const auto* list : {&plan.loads, &plan.saves})
      for (const auto& t : *list)
        for (auto u : t.units)
          transfer_units[at++] = u;
    std::memset(host_at<uint64_t>(off_transfer_sums), 0, 8 * (plan.loads.size() + plan.saves.size()));
    req_token_start[plan.requests.size()] = row;
    req_block_table_start[plan.requests.size()] = table;
    b.num_tokens = row;
    b.num_reqs = static_cast<int32_t>(plan.requests.size());
    b.num_samples = samples;
    b.block_table_len = table;
    b.max_position = max_position;
    b.token_ids = dev_at<int32_t>(off_token_ids);
    b.positions = dev_at<int32_t>(off_positions);
    b.token_req = dev_at<int32_t>(off_token_req);
    b.slot_mapping = dev_at<int32_t>(off_slot_mapping);
    b.req_token_start = dev_at<int32_t>(off_req_token_start);
    b.req_first_position = dev_at<int32_t>(off_req_first_position);
    b.req_block_table_start = dev_at<int32_t>(off_req_block_table_start);
    b.block_tables = dev_at<int32_t>(off_block_tables);
    b.req_state_slot = dev_at<int32_t>(off_req_state_slot);
    b.req_reset_state = dev_at<int32_t>(off_req_reset_state);
    b.sample_rows = dev_at<int32_t>(off_sample_rows);
    b.sample_temperature = dev_at<float>(off_sample_temperature);
    b.sample_seed = dev_at<uint64_t>(off_sample_seed);
    return b;
  }
};

step_executor::step_executor(device& dev, model& m, const step_executor_options& options)
    : impl_(std::make_unique<impl>(dev, m, options)) {}

step_executor::~step_executor() = default;

bool step_executor::sums_transfers(const std::vector<kv_field>& fields) {
  return std::all_of(fields.begin(), fields.end(), [](const kv_field& f) { return f.block_bytes() % 8 == 0; });
}

namespace {

// Enqueues on the device and reports each operation to the sink (when there is one), in the
// order it was enqueued, and its completion: on a device that runs host work (the CPU device)
// with a host callback on the op's own stream; on a GPU, where each host callback stalls its
// stream for tens of microseconds, every op of the step is reported done by the step's own
// completion callback (finish()), so a GPU timeline shows when a step's work had all completed,
// not each op's end.
struct op_log {
  device& dev;
  device_op_sink* sink;
  command_header step;
  std::vector<std::pair<uint64_t, stream_kind>> untimed; // reported done by finish()

  void note(stream_kind stream, device_op op, bool timed = true) {
    if (!sink)
      return;
    op.stream = static_cast<uint8_t>(stream);
    uint64_t seq = sink->record_device_op(step, op);
    if (!timed)
      return;
    if (!dev.runs_host_work()) {
      untimed.push_back({seq, stream});
      return;
    }
    dev.host_callback(stream, [sink = sink, step = step, stream, seq] { done(sink, step, seq, stream); });
  }
  static void done(device_op_sink* sink, const command_header& step, uint64_t seq, stream_kind stream) {
    device_op d;
    d.op = device_op_kind::done;
    d.stream = static_cast<uint8_t>(stream);
    d.op_seq = seq;
    sink->record_device_op(step, d);
  }
  // Run by the step's completion callback: reports what note() left untimed.
  static void finish(device_op_sink* sink, const command_header& step,
                     const std::vector<std::pair<uint64_t, stream_kind>>& untimed) {
    for (const auto& [seq, stream] : untimed)
      done(sink, step, seq, stream);
  }
  event_id record(stream_kind stream) {
    event_id e = dev.record(stream);
    device_op op;
    op.op = device_op_kind::event_record;
    op.event_id = e;
    note(stream, op, false);
    return e;
  }
  void wait(stream_kind stream, event_id e) {
    dev.wait(stream, e);
    device_op op;
    op.op = device_op_kind::event_wait;
    op.event_id = e;
    note(stream, op, false);
  }
};

device_op transfer_op(device_op_kind kind, const unit_transfer& t) {
  device_op op;
  op.op = kind;
  op.request_id = t.request_id;
  op.reads_inputs = true; // the unit ids come from the uploaded inputs
  op.object_kind = t.kind;
  op.data_offset = t.data_offset;
  op.data_bytes = t.data_bytes;
  for (auto u : t.units)
    if (u >= 0)
      (kind == device_op_kind::load ? op.units_written : op.units_read).push_back(u);
  return op;
}

device_op forward_op(const step_plan& plan, int32_t block_size, int32_t tokens) {
  device_op op;
  op.op = device_op_kind::forward;
  op.reads_inputs = true;
  op.tokens = tokens;
  for (const auto& r : plan.requests) {
    op.units_read.insert(op.units_read.end(), r.block_table.begin(), r.block_table.end());
    int32_t first = r.first_position / block_size;
    int32_t last = (r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1) / block_size;
    for (int32_t b = first; b <= last; ++b)
      op.units_written.push_back(r.block_table[static_cast<size_t>(b)]);
    if (r.state_slot >= 0) {
      op.slots_read.push_back(r.state_slot);
      op.slots_written.push_back(r.state_slot);
    }
  }
  return op;
}

device_op image_op(device_op_kind kind, const state_image_copy& c) {
  device_op op;
  op.op = kind;
  op.request_id = c.request_id;
  if (kind == device_op_kind::restore) {
    op.units_read = c.units;
    op.slots_written = {c.state_slot};
  } else {
    op.slots_read = {c.state_slot};
    op.units_written = c.units;
  }
  return op;
}

// Whether a save of `plan` reads a unit its clears, loads, forward or checkpoint copies write.
bool saves_read_written_units(const step_plan& plan, int32_t block_size) {
  std::vector<int32_t> written = plan.clears;
  for (const auto& t : plan.loads)
    written.insert(written.end(), t.units.begin(), t.units.end());
  const device_op forward = forward_op(plan, block_size, 0);
  written.insert(written.end(), forward.units_written.begin(), forward.units_written.end());
  for (const auto& c : plan.checkpoint_copies)
    written.insert(written.end(), c.units.begin(), c.units.end());
  std::sort(written.begin(), written.end());
  for (const auto& t : plan.saves)
    for (int32_t u : t.units)
      if (u >= 0 && std::binary_search(written.begin(), written.end(), u))
        return true;
  return false;
}

} // namespace

void step_executor::execute(const step_plan& plan, std::function<void(step_done)> on_done) {
  auto& d = *impl_;
  d.validate(plan);
  auto started = std::chrono::steady_clock::now();
  device_batch batch = d.pack(plan);
  const fault_edge drop = d.opt.drop_edge;
  op_log log{d.dev, d.opt.ops, plan.header, {}};

  d.dev.copy_async(stream_kind::load, d.inputs, d.staging, d.input_bytes);
  {
    device_op op;
    op.op = device_op_kind::upload;
    op.writes_inputs = true;
    log.note(stream_kind::load, op);
  }
  event_id inputs_uploaded = log.record(stream_kind::load);

  for (auto u : plan.clears)
    d.units.enqueue_clear(d.dev, stream_kind::compute, u);
  if (!plan.clears.empty()) {
    device_op op;
    op.op = device_op_kind::clear;
    op.units_written = plan.clears;
    log.note(stream_kind::compute, op);
  }
  // Transfers read their unit ids from the uploaded inputs, in plan order (loads, then saves).
  const int32_t* transfer_ids = d.dev_at<int32_t>(d.off_transfer_units);
  // Transfer i's checksum sum (loads, then saves).
  uint64_t* const sums = reinterpret_cast<uint64_t*>(d.inputs + d.off_transfer_sums);
  size_t transfer_index = 0;
  // A list's copies go out as one batch (one launch on a GPU), each noted in plan order.
  auto transfer = [&](const std::vector<unit_transfer>& list, stream_kind stream, unit_copy_direction dir,
                      bool beside_forward) {
    std::vector<unit_copy_args> batch;
    batch.reserve(list.size());
    for (const auto& t : list) {
      bool kv = t.kind == static_cast<uint8_t>(object_kind::kv_chunk);
      auto n = static_cast<int32_t>(t.units.size());
      batch.push_back(
          chunk_copy_args(*d.copy_fields, transfer_ids, n, d.opt.host_arena + t.data_offset, dir, /*segment_major=*/kv));
      batch.back().beside_forward = beside_forward;
      if (d.sum_transfers)
        batch.back().checksum = sums + transfer_index;
      transfer_ids += n;
      ++transfer_index;
    }
    d.table->unit_copy_batch(stream, batch.data(), batch.size());
    for (const auto& t : list)
      log.note(stream, transfer_op(dir == unit_copy_direction::scatter ? device_op_kind::load : device_op_kind::save, t));
  };
  if (!plan.loads.empty()) {
    event_id cleared = log.record(stream_kind::compute);
    if (drop != fault_edge::clear_load)
      log.wait(stream_kind::load, cleared);
    transfer(plan.loads, stream_kind::load, unit_copy_direction::scatter, false);
    event_id loaded = log.record(stream_kind::load);
    if (drop != fault_edge::load_forward)
      log.wait(stream_kind::compute, loaded);
  }
  // A save of units this step leaves alone (a chunk an earlier step computed) waits only for the
  // inputs that carry its unit ids. It goes out before the forward is enqueued, so its gather runs
  // beside the forward's kernels instead of after the host has launched them all. A save that
  // reads a unit this step's clears, loads, forward or checkpoint copies write goes out after them
  // (below). Either way the step completes after its saves.
  const bool saves_follow_forward = !plan.saves.empty() && saves_read_written_units(plan, d.block_size);
  std::optional<event_id> saved;
  if (!plan.saves.empty() && !saves_follow_forward) {
    log.wait(stream_kind::save, inputs_uploaded);
    transfer(plan.saves, stream_kind::save, unit_copy_direction::gather, batch.num_tokens > 0);
    saved = log.record(stream_kind::save);
  }
  for (const auto& c : plan.restores) {
    d.units.enqueue_unpack(d.dev, stream_kind::compute, c.units, c.state_slot);
    log.note(stream_kind::compute, image_op(device_op_kind::restore, c));
  }
  if (drop != fault_edge::upload_compute)
    log.wait(stream_kind::compute, inputs_uploaded);
  if (batch.num_tokens > 0) {
    d.mdl.enqueue_forward(stream_kind::compute, batch);
    log.note(stream_kind::compute, forward_op(plan, d.block_size, batch.num_tokens));
  }
  for (const auto& c : plan.checkpoint_copies) {
    d.units.enqueue_pack(d.dev, stream_kind::compute, c.state_slot, c.units);
    log.note(stream_kind::compute, image_op(device_op_kind::checkpoint_copy, c));
  }
  if (saves_follow_forward) {
    event_id produced = log.record(stream_kind::compute);
    if (drop != fault_edge::forward_save)
      log.wait(stream_kind::save, produced);
    transfer(plan.saves, stream_kind::save, unit_copy_direction::gather, false);
    saved = log.record(stream_kind::save);
  }
  if (saved)
    log.wait(stream_kind::compute, *saved);

  auto outputs = d.mdl.outputs();
  const bool summed = d.sum_transfers && (!plan.loads.empty() || !plan.saves.empty());
  if (summed) // after the transfers: compute waited for the loads before the forward, the saves above
    d.dev.copy_async(stream_kind::compute, d.host_sums, sums, 8 * (plan.loads.size() + plan.saves.size()));
  size_t num_samples = static_cast<size_t>(batch.num_samples);
  d.dev.copy_async(stream_kind::compute, d.host_logits, outputs.logits, 4 * num_samples * static_cast<size_t>(d.vocab));
  d.dev.copy_async(stream_kind::compute, d.host_tokens, outputs.sampled_tokens, 4 * num_samples);
  {
    device_op op;
    op.op = device_op_kind::output_copy;
    log.note(stream_kind::compute, op);
  }
  {
    device_op op;
    op.op = device_op_kind::complete;
    log.note(stream_kind::compute, op, false);
  }

  // Who sampled what, in sample order, captured now: the callback must not read `plan`.
  std::vector<sampled_token> samples;
  for (const auto& r : plan.requests)
    if (r.sample)
      samples.push_back({r.request_id, r.first_position + static_cast<int32_t>(r.token_ids.size()) - 1, 0, 0});
  std::vector<uint64_t> object_bytes; // each transfer's object bytes (loads, then saves), to finish its checksum
  if (summed)
    for (const auto* list : {&plan.loads, &plan.saves})
      for (const auto& t : *list)
        object_bytes.push_back(t.data_bytes);
  d.dev.host_callback(stream_kind::compute, [&d, header = plan.header, samples = std::move(samples), started,
                                            object_bytes = std::move(object_bytes), loads = plan.loads.size(),
                                            on_done = std::move(on_done), sink = log.sink,
                                            untimed = std::move(log.untimed)]() mutable {
    if (sink)
      op_log::finish(sink, header, untimed);
    step_done done;
    done.header = header;
    for (size_t i = 0; i < samples.size(); ++i) {
      samples[i].token_id = d.host_tokens[i];
      samples[i].logits_digest =
          XXH64(d.host_logits + i * static_cast<size_t>(d.vocab), 4 * static_cast<size_t>(d.vocab), 0);
    }
    done.samples = std::move(samples);
    for (size_t k = 0; k < object_bytes.size(); ++k)
      (k < loads ? done.load_checksums : done.save_checksums)
          .push_back(checksum_finish(d.host_sums[k], object_bytes[k]));
    done.device_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    on_done(std::move(done));
  });
}

} // namespace ordo
