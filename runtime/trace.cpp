#include "runtime/trace.hpp"

namespace ordo {

const char* to_string(device_op_kind k) {
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

const char* to_string(fault_edge e) {
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
