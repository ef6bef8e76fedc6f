// Trace files (docs/traces.md): a stream of unpacked, framed Cap'n Proto TraceRecord messages
// (messages/trace/trace.capnp); record 0 is the header.
//
// trace_recorder: called on the actors' threads (and the step executor's), it only stamps a
// record (sequence number, monotonic time) and queues a copy of the message; one writer thread
// wakes every 2 ms (or when 1024 records wait), builds the Cap'n Proto records, writes them and
// flushes, so a process that dies leaves a file readable up to its last whole record, missing
// at most the last 2 ms.
// trace_reader: yields records one by one; a record cut short (the writer died mid-record) ends
// the file and is reported by truncated(), never thrown. A damaged record (a size over the cap,
// more segments than capnp allows, pointers that do not decode or alias one another) throws, once,
// naming the file, the record and the byte it starts at: the reader trusts no size in the file.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/io.h>

#include "messages/capnp_convert.hpp"
#include "messages/ordo.capnp.h"
#include "messages/trace/trace.capnp.h"
#include "messages/trace/device_ops.hpp"

namespace ordo {

inline constexpr uint32_t trace_schema_version = 1;
// The largest record a reader accepts (a step plan of a full batch is a few hundred KiB): a
// segment table claiming more is a damaged file, refused before anything is allocated.
inline constexpr uint64_t trace_record_max_bytes = uint64_t{16} << 20;

enum class trace_direction : uint8_t { in = 0, out = 1, local = 2 };

struct trace_header_info {
  std::string ordo_version;
  std::string config_text;
  std::string node = "node";
  std::string drop_edge;
  uint64_t namespace_id = 0;
  uint64_t chaos_seed = 0;
};

// Sets the TraceRecord payload for a message type (one overload per type in the union).
#define ORDO_TRACE_PAYLOAD(cpp_type) void set_trace_payload(wire::TraceRecord::Payload::Builder p, const cpp_type& m);
ORDO_TRACE_PAYLOAD(completion_request)
ORDO_TRACE_PAYLOAD(completion_chunk)
ORDO_TRACE_PAYLOAD(completion_result)
ORDO_TRACE_PAYLOAD(completion_failed)
ORDO_TRACE_PAYLOAD(cancel_request)
ORDO_TRACE_PAYLOAD(evict_request)
ORDO_TRACE_PAYLOAD(evict_result)
ORDO_TRACE_PAYLOAD(step_plan)
ORDO_TRACE_PAYLOAD(step_done)
ORDO_TRACE_PAYLOAD(pool_step)
ORDO_TRACE_PAYLOAD(pool_step_done)
ORDO_TRACE_PAYLOAD(connector_lookup)
ORDO_TRACE_PAYLOAD(connector_lookup_done)
ORDO_TRACE_PAYLOAD(connector_step)
ORDO_TRACE_PAYLOAD(connector_step_done)
ORDO_TRACE_PAYLOAD(store_contains)
ORDO_TRACE_PAYLOAD(store_contains_done)
ORDO_TRACE_PAYLOAD(store_step)
ORDO_TRACE_PAYLOAD(store_step_done)
ORDO_TRACE_PAYLOAD(store_corrupt)
ORDO_TRACE_PAYLOAD(store_hello)
ORDO_TRACE_PAYLOAD(store_welcome)
#undef ORDO_TRACE_PAYLOAD

// The step a message belongs to: its command header when it has one.
template <class T>
auto trace_step_of(const T& m, int) -> decltype(m.header, command_header{}) {
  return m.header;
}
template <class T>
command_header trace_step_of(const T&, long) {
  return {};
}

// The message a record carries (an error record: its text).
using trace_message =
    std::variant<std::string, completion_request, completion_chunk, completion_result, completion_failed,
                 cancel_request, evict_request, evict_result, step_plan, step_done, pool_step, pool_step_done,
                 connector_lookup, connector_lookup_done, connector_step, connector_step_done, store_contains,
                 store_contains_done, store_step, store_step_done, store_corrupt, store_hello, store_welcome>;
// Nothing for a header, a device op or a store verdict.
std::optional<trace_message> decode_trace_message(wire::TraceRecord::Reader r);

class trace_recorder : public device_op_sink {
public:
  // Creates (truncates) `path` and writes the header. Throws std::runtime_error naming the path.
  trace_recorder(const std::string& path, const trace_header_info& header);
  ~trace_recorder() override; // writes what is queued, then closes
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;

  // A message `actor` received from (in) or sent to (out) `peer`, at `ts_ns` (now_ns() when
  // left out: an actor that hands the time to its core passes the same value here).
  template <class T>
  uint64_t message(const char* actor, trace_direction dir, const std::string& peer, const T& m,
                   uint64_t ts_ns = no_time) {
    return push(actor, dir, peer, wire_type<T>::name, trace_step_of(m, 0),
                [m](wire::TraceRecord::Payload::Builder p) { set_trace_payload(p, m); }, ts_ns);
  }
  // Monotonic nanoseconds since the recording started (the records' tsNs).
  uint64_t now_ns() const;
  static constexpr uint64_t no_time = ~uint64_t{0};
  // A request of `actor` answered with an error instead of its reply.
  uint64_t error(const char* actor, trace_direction dir, const std::string& peer, const std::string& kind,
                 const std::string& text);
  // The store's checksum and header verdict at a pin (an input of its core on replay).
  uint64_t store_verdict(const object_key& key, const std::string& status);
  uint64_t record_device_op(const command_header& step, const device_op& op) override;

  // Blocks until every record queued so far is written and flushed.
  void flush();
  uint64_t records_written() const { return written_.load(); }
  uint64_t bytes_written() const { return bytes_.load(); }
  const std::string& path() const { return path_; }

private:
  struct item {
    uint64_t seq;
    uint64_t ts_ns;
    command_header step;
    const char* actor;
    trace_direction dir;
    std::string peer;
    const char* kind;
    std::function<void(wire::TraceRecord::Payload::Builder)> payload;
  };
  uint64_t push(const char* actor, trace_direction dir, const std::string& peer, const char* kind,
                command_header step, std::function<void(wire::TraceRecord::Payload::Builder)> payload,
                uint64_t ts_ns = no_time);
  void write_loop();

  std::string path_;
  int fd_ = -1;
  uint64_t start_ns_ = 0;
  std::mutex mu_;
  std::condition_variable cv_, flushed_cv_;
  std::deque<item> queue_;
  uint64_t next_seq_ = 1; // under mu_: records are queued in seq order
  uint64_t done_seq_ = 0; // under mu_: every record up to it is written and flushed
  bool stop_ = false;
  bool flush_asked_ = false; // under mu_
  static constexpr size_t wake_at_queue = 1024;
  static constexpr std::chrono::milliseconds writer_period{2};
  std::atomic<uint64_t> written_{0}, bytes_{0};
  std::thread writer_;
};

class trace_reader {
public:
  // Opens `path`. Throws std::runtime_error naming the path when it cannot be opened or does
  // not start with a trace header.
  explicit trace_reader(const std::string& path);
  ~trace_reader();
  trace_reader(const trace_reader&) = delete;
  trace_reader& operator=(const trace_reader&) = delete;

  wire::TraceHeader::Reader header() const;
  // Advances to the next whole record; false at the end of the file or at a record cut short.
  // Throws std::runtime_error ("PATH: record K (at byte B) is damaged: why") at a damaged one.
  bool next();
  wire::TraceRecord::Reader record() const;
  // The current record's words, handed over (record() is invalid until the next next()).
  kj::Array<capnp::word> take_record();
  // Records read so far (the header not counted).
  uint64_t count() const { return count_; }
  // True when the file ended inside a record; truncation() says where.
  bool truncated() const { return !truncation_.empty(); }
  const std::string& truncation() const { return truncation_; }

private:
  struct impl;
  std::unique_ptr<impl> impl_;
  uint64_t count_ = 0;
  std::string truncation_;
};

// Every record of `path` in one pass (for tools that index the whole file). Throws like
// trace_reader at a file that is not a trace or a damaged record.
struct trace_contents {
  std::unique_ptr<capnp::MallocMessageBuilder> header_message;
  wire::TraceRecord::Reader header_record;
  std::vector<kj::Array<capnp::word>> words; // one flat array per record
  std::vector<std::unique_ptr<capnp::FlatArrayMessageReader>> readers;
  bool truncated = false;
  std::string truncation;
  wire::TraceHeader::Reader header() const;
  size_t size() const { return readers.size(); }
  wire::TraceRecord::Reader operator[](size_t i) const; // i-th record after the header (seq i + 1)
};
trace_contents read_trace(const std::string& path);

} // namespace ordo
