// What cores and the step executor tell a trace recorder (docs/traces.md), as plain data: the
// device operations of the step protocol, with the units, slots and host objects each touches,
// and the verdicts a core draws from bytes it reads. The recorder that writes them to a file is
// messages/trace/trace_file.hpp; without one, nothing here costs anything. Header-only, because
// runtime/ (the step executor, the config) uses it and ordo_core links below ordo_messages.
#pragma once

#include <cstdint>
#include <vector>

#include "messages/common.hpp"

namespace ordo {

// Mirrors wire::DeviceOpKind (messages/trace/trace.capnp): same order, same values.
enum class device_op_kind : uint8_t {
  upload,          // step inputs, pinned staging → device (writes the inputs buffer)
  clear,           // declared fill of units given back
  load,            // host object → units (scatter)
  restore,         // units → state slot
  forward,         // the model's forward and sampling
  checkpoint_copy, // state slot → units
  save,            // units → host object (gather)
  output_copy,     // logits and sampled tokens → pinned host
  event_record,    // marks the stream's current end as event_id
  event_wait,      // the stream waits for event_id
  complete,        // the step's host callback: every operation before it has completed
  done,            // an operation completed (timing only; op_seq names it)
};

struct device_op {
  device_op_kind op = device_op_kind::forward;
  uint8_t stream = 0; // stream_kind: 0 compute, 1 load, 2 save
  uint64_t event_id = 0;
  uint64_t request_id = 0;
  std::vector<int32_t> units_read;
  std::vector<int32_t> units_written;
  std::vector<int32_t> slots_read;
  std::vector<int32_t> slots_written;
  bool reads_inputs = false;
  bool writes_inputs = false;
  uint8_t object_kind = 0;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
  uint64_t op_seq = 0;
  int32_t tokens = 0;
};

// Where the step executor reports each device operation, in enqueue order, on the thread that
// enqueues it (`done` on the device thread that ran it). Returns the record's sequence number.
class device_op_sink {
public:
  virtual ~device_op_sink() = default;
  virtual uint64_t record_device_op(const command_header& step, const device_op& op) = 0;
};

// A dependency edge of the step protocol that faults.drop_edge removes (testing trace check).
enum class fault_edge : uint8_t {
  none,
  clear_load,     // the load stream's wait for the step's clears
  load_forward,   // the compute stream's wait for the step's loads
  forward_save,   // the save stream's wait for the forward and checkpoint copies
  upload_compute, // the compute stream's wait for the step inputs' upload
};

inline const char* to_string(device_op_kind k) {
  switch (k) {
  case device_op_kind::upload: return "upload";
  case device_op_kind::clear: return "clear";
  case device_op_kind::load: return "load";
  case device_op_kind::restore: return "restore";
  case device_op_kind::forward: return "forward";
  case device_op_kind::checkpoint_copy: return "checkpoint_copy";
  case device_op_kind::save: return "save";
  case device_op_kind::output_copy: return "output_copy";
  case device_op_kind::event_record: return "event_record";
  case device_op_kind::event_wait: return "event_wait";
  case device_op_kind::complete: return "complete";
  case device_op_kind::done: return "done";
  }
  return "?";
}

// "" for none, else the faults.drop_edge value
inline const char* to_string(fault_edge e) {
  switch (e) {
  case fault_edge::none: return "";
  case fault_edge::clear_load: return "clear_load";
  case fault_edge::load_forward: return "load_forward";
  case fault_edge::forward_save: return "forward_save";
  case fault_edge::upload_compute: return "upload_compute";
  }
  return "?";
}

} // namespace ordo
