// `ordo trace check` (docs/traces.md): the DESIGN §2.1 ordering rules checked on the
// happens-before graph of one trace file. Pure: no CAF.
//
// Nodes are the records (not the header, not `done` records). Lanes: one per actor (program
// order = seq order of its in/out/local records that are not device operations) and one per
// device stream (seq order of its device operations). Edges: program order; a message's `out`
// record → the matching `in` record (FIFO per (sender, receiver) channel; an `error` is matched
// like a message); event_record(E) → event_wait(E); the runner's latest earlier record → each
// device operation (its enqueue); a step's `complete` → the runner's `in step_done` from
// "device" of that step. Every edge goes up in seq, so one pass with vector clocks decides
// happens-before.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "messages/trace/trace_file.hpp"

namespace ordo {

struct trace_violation {
  std::string rule;         // clear_before_load, load_before_use, … (see check_trace)
  uint64_t first_seq = 0;   // the record that must come first
  uint64_t second_seq = 0;  // the record it does not happen before
  std::string detail;       // one line: both records and the resource
  std::string advice;       // one line: what the rule asks of the step protocol
};

struct trace_check_result {
  uint64_t records = 0;          // records read (the header not counted)
  uint64_t messages_matched = 0; // in-records matched with their out-record
  uint64_t device_ops = 0;       // device operations, `done` records not counted
  uint64_t steps = 0;            // distinct steps with device operations
  bool truncated = false;
  std::string truncation;        // trace_contents::truncation
  uint64_t last_seq = 0;         // seq of the last whole record
  std::optional<trace_violation> violation; // the first (lowest second_seq)
  uint64_t commits_checked = 0;  // store commits matched to the save that wrote their data
  uint64_t images_checked = 0;   // READY images matched to the step whose checkpoint copy (or host
                                 // load) wrote their units

  // Matching problems (not §2.1 violations): in-records from a known actor with no matching
  // out-record, or whose kind differs from it.
  uint64_t unmatched = 0;
  std::string first_unmatched; // a description of the first one ("" when none)

  // "trace check: N records (M messages, D device ops, S steps): no violation[; file cut …]"
  // or, with a violation, "trace check: VIOLATION <rule>: …" followed by a line of advice.
  std::string summary() const;
  // "" when every in-record from a known actor matched its send on its own channel; else one
  // warning line per kind of problem.
  std::string warning() const;
};

// Rules: clear_before_load, load_before_use, produce_before_save, upload_before_compute,
// transfer_before_reuse, ordered_access (resource accesses of device operations),
// commit_after_save, ready_after_step, seq_contiguous.
trace_check_result check_trace(const trace_contents& trace);

} // namespace ordo
