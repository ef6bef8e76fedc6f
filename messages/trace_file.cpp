#include "messages/trace_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <capnp/message.h>
#include <kj/exception.h>
#include <xxhash.h>

namespace ordo {

namespace {

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

kj::StringPtr text(const std::string& s) { return kj::StringPtr(s.c_str(), s.size()); }

wire::TraceDirection to_wire(trace_direction d) {
  switch (d) {
  case trace_direction::in: return wire::TraceDirection::IN;
  case trace_direction::out: return wire::TraceDirection::OUT;
  case trace_direction::local: return wire::TraceDirection::LOCAL;
  }
  return wire::TraceDirection::LOCAL;
}

template <class List, class V>
void fill(List l, const std::vector<V>& v) {
  for (unsigned i = 0; i < v.size(); ++i)
    l.set(i, v[i]);
}

} // namespace

#define ORDO_TRACE_PAYLOAD(cpp_type, field)                                                        \
  void set_trace_payload(wire::TraceRecord::Payload::Builder p, const cpp_type& m) {               \
    to_capnp(m, p.init##field());                                                                  \
  }
ORDO_TRACE_PAYLOAD(completion_request, CompletionRequest)
ORDO_TRACE_PAYLOAD(completion_chunk, CompletionChunk)
ORDO_TRACE_PAYLOAD(completion_result, CompletionResult)
ORDO_TRACE_PAYLOAD(completion_failed, CompletionFailed)
ORDO_TRACE_PAYLOAD(cancel_request, CancelRequest)
ORDO_TRACE_PAYLOAD(evict_request, EvictRequest)
ORDO_TRACE_PAYLOAD(evict_result, EvictResult)
ORDO_TRACE_PAYLOAD(step_plan, StepPlan)
ORDO_TRACE_PAYLOAD(step_done, StepDone)
ORDO_TRACE_PAYLOAD(pool_step, PoolStep)
ORDO_TRACE_PAYLOAD(pool_step_done, PoolStepDone)
ORDO_TRACE_PAYLOAD(connector_lookup, ConnectorLookup)
ORDO_TRACE_PAYLOAD(connector_lookup_done, ConnectorLookupDone)
ORDO_TRACE_PAYLOAD(connector_step, ConnectorStep)
ORDO_TRACE_PAYLOAD(connector_step_done, ConnectorStepDone)
ORDO_TRACE_PAYLOAD(store_contains, StoreContains)
ORDO_TRACE_PAYLOAD(store_contains_done, StoreContainsDone)
ORDO_TRACE_PAYLOAD(store_step, StoreStep)
ORDO_TRACE_PAYLOAD(store_step_done, StoreStepDone)
ORDO_TRACE_PAYLOAD(store_corrupt, StoreCorrupt)
ORDO_TRACE_PAYLOAD(store_hello, StoreHello)
ORDO_TRACE_PAYLOAD(store_welcome, StoreWelcome)
#undef ORDO_TRACE_PAYLOAD

std::optional<trace_message> decode_trace_message(wire::TraceRecord::Reader r) {
  auto p = r.getPayload();
  switch (p.which()) {
#define ORDO_CASE(field, getter)                                                                   \
  case wire::TraceRecord::Payload::field:                                                          \
    return trace_message(from_capnp(p.getter()));
    ORDO_CASE(COMPLETION_REQUEST, getCompletionRequest)
    ORDO_CASE(COMPLETION_CHUNK, getCompletionChunk)
    ORDO_CASE(COMPLETION_RESULT, getCompletionResult)
    ORDO_CASE(COMPLETION_FAILED, getCompletionFailed)
    ORDO_CASE(CANCEL_REQUEST, getCancelRequest)
    ORDO_CASE(EVICT_REQUEST, getEvictRequest)
    ORDO_CASE(EVICT_RESULT, getEvictResult)
    ORDO_CASE(STEP_PLAN, getStepPlan)
    ORDO_CASE(STEP_DONE, getStepDone)
    ORDO_CASE(POOL_STEP, getPoolStep)
    ORDO_CASE(POOL_STEP_DONE, getPoolStepDone)
    ORDO_CASE(CONNECTOR_LOOKUP, getConnectorLookup)
    ORDO_CASE(CONNECTOR_LOOKUP_DONE, getConnectorLookupDone)
    ORDO_CASE(CONNECTOR_STEP, getConnectorStep)
    ORDO_CASE(CONNECTOR_STEP_DONE, getConnectorStepDone)
    ORDO_CASE(STORE_CONTAINS, getStoreContains)
    ORDO_CASE(STORE_CONTAINS_DONE, getStoreContainsDone)
    ORDO_CASE(STORE_STEP, getStoreStep)
    ORDO_CASE(STORE_STEP_DONE, getStoreStepDone)
    ORDO_CASE(STORE_CORRUPT, getStoreCorrupt)
    ORDO_CASE(STORE_HELLO, getStoreHello)
    ORDO_CASE(STORE_WELCOME, getStoreWelcome)
#undef ORDO_CASE
  case wire::TraceRecord::Payload::ERROR:
    return trace_message(std::string(p.getError().cStr()));
  default:
    return std::nullopt;
  }
}

// --- recorder ---------------------------------------------------------------------------------

trace_recorder::trace_recorder(const std::string& path, const trace_header_info& info) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("trace.path = \"" + path + "\": cannot create it: " + std::strerror(errno));
  start_ns_ = monotonic_ns();
  capnp::MallocMessageBuilder b;
  auto r = b.initRoot<wire::TraceRecord>();
  r.setSeq(0);
  r.setActor("node");
  r.setDirection(wire::TraceDirection::LOCAL);
  r.setKind("header");
  auto h = r.getPayload().initHeader();
  h.setSchemaVersion(trace_schema_version);
  h.setOrdoVersion(text(info.ordo_version));
  h.setConfigText(text(info.config_text));
  h.setConfigDigest(XXH64(info.config_text.data(), info.config_text.size(), 0));
  h.setNamespaceId(info.namespace_id);
  h.setChaosSeed(info.chaos_seed);
  h.setStartUnixMs(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()));
  h.setNode(text(info.node));
  h.setDropEdge(text(info.drop_edge));
  try {
    capnp::writeMessageToFd(fd_, b);
  } catch (const kj::Exception& e) {
    ::close(fd_);
    throw std::runtime_error("trace.path = \"" + path + "\": cannot write: " + e.getDescription().cStr());
  }
  writer_ = std::thread([this] { write_loop(); });
}

trace_recorder::~trace_recorder() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  writer_.join();
  ::close(fd_);
}

uint64_t trace_recorder::now_ns() const { return monotonic_ns() - start_ns_; }

uint64_t trace_recorder::push(const char* actor, trace_direction dir, const std::string& peer, const char* kind,
                              command_header step, std::function<void(wire::TraceRecord::Payload::Builder)> payload,
                              uint64_t ts_ns) {
  uint64_t ts = ts_ns == no_time ? now_ns() : ts_ns;
  uint64_t seq;
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = next_seq_++;
    queue_.push_back(item{seq, ts, step, actor, dir, peer, kind, std::move(payload)});
    wake = queue_.size() == wake_at_queue;
  }
  // The writer polls every writer_period; waking it for each record would cost the caller a
  // futex call per message (measured: most of recording's cost on the H200).
  if (wake)
    cv_.notify_one();
  return seq;
}

uint64_t trace_recorder::error(const char* actor, trace_direction dir, const std::string& peer,
                               const std::string& kind, const std::string& text_) {
  return push(actor, dir, peer, "error", {}, [kind, text_](wire::TraceRecord::Payload::Builder p) {
    p.setError(text(kind + ": " + text_));
  });
}

uint64_t trace_recorder::store_verdict(const object_key& key, const std::string& status) {
  return push("store", trace_direction::local, "", "store_verdict", {},
              [key, status](wire::TraceRecord::Payload::Builder p) {
                auto v = p.initStoreVerdict();
                to_capnp(key, v.initKey());
                v.setStatus(text(status));
              });
}

uint64_t trace_recorder::record_device_op(const command_header& step, const device_op& op) {
  return push("model_runner", trace_direction::local, "", to_string(op.op), step,
              [op](wire::TraceRecord::Payload::Builder p) {
                auto d = p.initDeviceOp();
                d.setOp(static_cast<wire::DeviceOpKind>(op.op));
                d.setStream(op.stream);
                d.setEventId(op.event_id);
                d.setRequestId(op.request_id);
                fill(d.initUnitsRead(op.units_read.size()), op.units_read);
                fill(d.initUnitsWritten(op.units_written.size()), op.units_written);
                fill(d.initSlotsRead(op.slots_read.size()), op.slots_read);
                fill(d.initSlotsWritten(op.slots_written.size()), op.slots_written);
                d.setReadsInputs(op.reads_inputs);
                d.setWritesInputs(op.writes_inputs);
                d.setObjectKind(op.object_kind);
                d.setDataOffset(op.data_offset);
                d.setDataBytes(op.data_bytes);
                d.setOpSeq(op.op_seq);
                d.setTokens(op.tokens);
              });
}

void trace_recorder::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t want = next_seq_ - 1;
  flush_asked_ = true;
  cv_.notify_one();
  flushed_cv_.wait(lock, [&] { return done_seq_ >= want; });
}

void trace_recorder::write_loop() {
  kj::FdOutputStream raw(fd_);
  kj::BufferedOutputStreamWrapper out(raw);
  std::deque<item> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, writer_period, [&] { return stop_ || flush_asked_ || queue_.size() >= wake_at_queue; });
      flush_asked_ = false;
      if (queue_.empty() && stop_)
        return;
      batch.swap(queue_);
    }
    if (batch.empty())
      continue;
    uint64_t last = 0;
    for (auto& it : batch) {
      capnp::MallocMessageBuilder b(256);
      auto r = b.initRoot<wire::TraceRecord>();
      r.setSeq(it.seq);
      r.setTsNs(it.ts_ns);
      r.setStepEpoch(it.step.epoch);
      r.setStepSeq(it.step.seq);
      r.setActor(it.actor);
      r.setDirection(to_wire(it.dir));
      r.setPeer(text(it.peer));
      r.setKind(it.kind);
      it.payload(r.getPayload());
      try {
        capnp::writeMessage(out, b);
        bytes_ += capnp::computeSerializedSizeInWords(b) * sizeof(capnp::word);
      } catch (const kj::Exception&) {
        // A full disk or a closed fd: the run goes on, the trace stops growing.
      }
      last = it.seq;
      ++written_;
    }
    batch.clear();
    try {
      out.flush();
    } catch (const kj::Exception&) {
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_seq_ = last;
    }
    flushed_cv_.notify_all();
  }
}

// --- reader -----------------------------------------------------------------------------------

struct trace_reader::impl {
  int fd = -1;
  std::unique_ptr<kj::FdInputStream> raw;
  std::unique_ptr<kj::BufferedInputStreamWrapper> in;
  kj::Array<capnp::word> header_words, current_words;
  std::unique_ptr<capnp::FlatArrayMessageReader> header, current;
  ~impl() {
    current.reset();
    header.reset();
    in.reset();
    raw.reset();
    if (fd >= 0)
      ::close(fd);
  }
  // The next record as one flat array of exactly its size; empty at the end of the file.
  // Throws kj::Exception when the file ends inside the record.
  kj::Array<capnp::word> read_one() {
    if (in->tryGetReadBuffer().size() == 0)
      return nullptr;
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = 1ull << 30;
    capnp::InputStreamMessageReader reader(*in, opts);
    auto root = reader.getRoot<wire::TraceRecord>();
    capnp::MallocMessageBuilder copy(root.totalSize().wordCount + 1);
    copy.setRoot(root);
    return capnp::messageToFlatArray(copy);
  }
};

trace_reader::trace_reader(const std::string& path) : impl_(std::make_unique<impl>()) {
  impl_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl_->fd < 0)
    throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  impl_->raw = std::make_unique<kj::FdInputStream>(impl_->fd);
  impl_->in = std::make_unique<kj::BufferedInputStreamWrapper>(*impl_->raw);
  try {
    impl_->header_words = impl_->read_one();
  } catch (const kj::Exception& e) {
    throw std::runtime_error(path + ": not a trace file (its first record does not decode: " +
                             std::string(e.getDescription().cStr()).substr(0, 200) + ")");
  }
  if (impl_->header_words.size() == 0)
    throw std::runtime_error(path + ": empty file, not a trace");
  impl_->header = std::make_unique<capnp::FlatArrayMessageReader>(impl_->header_words.asPtr());
  auto r = impl_->header->getRoot<wire::TraceRecord>();
  if (!r.getPayload().isHeader())
    throw std::runtime_error(path + ": not a trace file (its first record is not a header)");
  if (r.getPayload().getHeader().getSchemaVersion() > trace_schema_version)
    throw std::runtime_error(path + ": trace schema version " +
                             std::to_string(r.getPayload().getHeader().getSchemaVersion()) +
                             " is newer than this ordo reads (" + std::to_string(trace_schema_version) + ")");
}

trace_reader::~trace_reader() = default;

wire::TraceHeader::Reader trace_reader::header() const {
  return impl_->header->getRoot<wire::TraceRecord>().getPayload().getHeader();
}

bool trace_reader::next() {
  if (truncated())
    return false;
  impl_->current.reset();
  try {
    impl_->current_words = impl_->read_one();
  } catch (const kj::Exception& e) {
    truncation_ = "cut short after record " + std::to_string(count_) + " (" +
                  std::string(e.getDescription().cStr()).substr(0, 160) + ")";
    return false;
  }
  if (impl_->current_words.size() == 0)
    return false;
  impl_->current = std::make_unique<capnp::FlatArrayMessageReader>(impl_->current_words.asPtr());
  ++count_;
  return true;
}

wire::TraceRecord::Reader trace_reader::record() const {
  return impl_->current->getRoot<wire::TraceRecord>();
}

kj::Array<capnp::word> trace_reader::take_record() {
  impl_->current.reset();
  return std::move(impl_->current_words);
}

wire::TraceHeader::Reader trace_contents::header() const { return header_record.getPayload().getHeader(); }

wire::TraceRecord::Reader trace_contents::operator[](size_t i) const {
  return readers[i]->getRoot<wire::TraceRecord>();
}

trace_contents read_trace(const std::string& path) {
  trace_reader reader(path);
  trace_contents out;
  out.header_message = std::make_unique<capnp::MallocMessageBuilder>();
  auto h = out.header_message->initRoot<wire::TraceRecord>();
  h.setKind("header");
  h.getPayload().setHeader(reader.header());
  out.header_record = h.asReader();
  while (reader.next()) {
    out.words.push_back(reader.take_record());
    out.readers.push_back(std::make_unique<capnp::FlatArrayMessageReader>(out.words.back().asPtr()));
  }
  out.truncated = reader.truncated();
  out.truncation = reader.truncation();
  return out;
}

} // namespace ordo
