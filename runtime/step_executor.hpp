// The model runner's core: turns a step_plan into device work with explicit event edges and
// reports completion through a callback run by the device (never by blocking a caller).
//
// Edges of one step (DESIGN §2.1):
//   load:    upload of the step's inputs (pinned staging → device)   ── event `inputs_uploaded`
//   compute: clears (units given back → declared fills)               ── event `cleared`
//   load:    wait(cleared) → loads (host objects → units, one scatter each) ── event `loaded`
//   compute: wait(loaded) → restores (units → slot) → wait(inputs_uploaded) → forward + sampling
//            → checkpoint copies (slot → units)                       ── event `produced`
//   save:    wait(produced) → saves (units → host objects, one gather each) ── event `saved`
//   compute: wait(saved) → copy logits and tokens to pinned host → host callback: step_done
// NOTE(clears-first): a plan's clears are the first compute work of the step and every load of
// the step waits for them, so no load, restore, forward or checkpoint copy of this or any later
// step can write a unit before its clear (the seed's bug: a clear landing after a load).
// NOTE(deferred free): step_done comes after every load and save of the step completed, and the
// scheduler frees or reuses blocks only after step_done, so no page a transfer reads or writes is
// reused while it runs.
// NOTE(trace): with an op sink, every operation above is reported as it is enqueued (with the
// units, slots and host bytes it touches) and again when it completes; the edges are the
// reported event records and waits, so trace check sees exactly what the device was told.
// NOTE(staging): one step is in flight at a time (the scheduler sends the next plan only after
// step_done), so the staging and input buffers are reused without further edges.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "messages/step.hpp"
#include "runtime/device.hpp"
#include "runtime/model.hpp"
#include "runtime/page_units.hpp"
#include "messages/trace/device_ops.hpp"

namespace ordo {

struct step_executor_options {
  int32_t max_batch_tokens = 512;
  int32_t max_num_seqs = 16;
  // faults.drop_edge: leaves that one edge out (testing trace check: with chaos on, the race it
  // opens becomes real; trace check names the rule it breaks even when outputs happen to match).
  fault_edge drop_edge = fault_edge::none;
  // Where each device operation is reported, in enqueue order, with a `done` record when it
  // completed (trace.path); null: nothing is reported.
  device_op_sink* ops = nullptr;
  // The host tier's arena (the store's memory: pinned on a GPU device); null without one.
  uint8_t* host_arena = nullptr;
  size_t host_arena_bytes = 0;
};

class step_executor {
public:
  step_executor(device& dev, model& m, const step_executor_options& options);
  ~step_executor();
  step_executor(const step_executor&) = delete;
  step_executor& operator=(const step_executor&) = delete;

  // Runs on the caller's thread (the runner's); `on_done` runs on a device thread once every
  // operation of the step has completed. Throws std::invalid_argument for a plan that does not
  // fit the capacities or whose block tables do not cover its tokens; nothing is enqueued then.
  void execute(const step_plan& plan, std::function<void(step_done)> on_done);

  // Whether a runner over these fields sums every transfer's object checksum in its gathers and
  // scatters (step_done.save_checksums, load_checksums): every field block a multiple of 8 bytes.
  static bool sums_transfers(const std::vector<kv_field>& fields);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace ordo
