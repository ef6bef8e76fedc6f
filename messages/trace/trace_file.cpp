#include "messages/trace/trace_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema.h>
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

namespace {

// capnp's own reader refuses more segments than this; a trace record has a handful.
constexpr uint32_t max_segments = 512;
// A record is a few structs deep (record → payload → list → struct → list); garbage pointers can
// claim any depth.
constexpr int record_nesting_limit = 16;

// Reads every field the schema reaches (the active member of each union), so that a pointer of
// the wrong kind, a Text without its NUL or an element of the wrong size throws here, once, and
// not later in each tool that reads the field. Recursion is bounded by the nesting limit.
void read_every_field(capnp::DynamicValue::Reader v);

void read_every_field(capnp::DynamicStruct::Reader s) {
  for (auto field : s.getSchema().getNonUnionFields())
    read_every_field(s.get(field));
  KJ_IF_MAYBE (field, s.which())
    read_every_field(s.get(*field));
}

void read_every_field(capnp::DynamicValue::Reader v) {
  switch (v.getType()) {
  case capnp::DynamicValue::STRUCT:
    read_every_field(v.as<capnp::DynamicStruct>());
    break;
  case capnp::DynamicValue::LIST: {
    auto list = v.as<capnp::DynamicList>();
    auto element = list.getSchema().whichElementType();
    if (element == capnp::schema::Type::STRUCT || element == capnp::schema::Type::LIST ||
        element == capnp::schema::Type::TEXT || element == capnp::schema::Type::DATA)
      for (auto e : list)
        read_every_field(e);
    break; // a list of numbers was checked (element size, bounds) when it was got
  }
  default:
    break; // numbers, enums, Text and Data were checked when they were got
  }
}

// capnp's reason on one short line: "expected ref->kind() == STRUCT [1 == 0]; Message contains
// non-struct pointer ..." keeps the sentence after "; "; bytes of the file it quotes become '?'.
std::string decode_error(const kj::Exception& e) {
  std::string d = e.getDescription().cStr();
  auto sentence = d.find("; ");
  if (d.rfind("expected ", 0) == 0 && sentence != std::string::npos)
    d = d.substr(sentence + 2);
  if (d.size() > 160)
    d = d.substr(0, 160) + "...";
  for (char& c : d)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      c = '?';
  return d;
}

std::string bytes_text(uint64_t bytes) {
  if (bytes >= (uint64_t{1} << 30))
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (uint64_t{1} << 20))
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

} // namespace

// Thread: whoever owns the reader. Reads the file through a fixed buffer; every size the file
// claims is checked against the cap and against the bytes the file has left before anything is
// allocated for it.
struct trace_reader::impl {
  std::string path;
  int fd = -1;
  uint64_t file_bytes = 0;
  uint64_t offset = 0; // bytes consumed
  std::vector<unsigned char> buf = std::vector<unsigned char>(64 * 1024);
  size_t buf_pos = 0, buf_end = 0;
  kj::Array<capnp::word> header_words, current_words;
  std::unique_ptr<capnp::FlatArrayMessageReader> header, current;

  ~impl() {
    current.reset();
    header.reset();
    if (fd >= 0)
      ::close(fd);
  }

  // Copies up to n bytes; fewer only at the end of the file.
  size_t read(void* dst, size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    size_t done = 0;
    while (done < n) {
      if (buf_pos == buf_end) {
        ssize_t got = ::read(fd, buf.data(), buf.size());
        if (got < 0 && errno == EINTR)
          continue;
        if (got < 0)
          throw std::runtime_error(path + ": cannot read at byte " + std::to_string(offset) + ": " +
                                   std::strerror(errno));
        if (got == 0)
          break;
        buf_pos = 0;
        buf_end = static_cast<size_t>(got);
      }
      size_t take = std::min(n - done, buf_end - buf_pos);
      std::memcpy(out + done, buf.data() + buf_pos, take);
      buf_pos += take;
      done += take;
      offset += take;
    }
    return done;
  }

  // Whether the file holds `n` more bytes after `offset` (its size asked again when not: a
  // recording may still be growing).
  bool has_left(uint64_t n) {
    struct stat st {};
    if (file_bytes < offset + n && ::fstat(fd, &st) == 0)
      file_bytes = static_cast<uint64_t>(st.st_size);
    return file_bytes >= offset + n;
  }

  enum class outcome { record, end, cut, damaged };

  // The next record as one flat array of exactly its size (into `words`). `why` says what cut or
  // damaged it. Bounded: at most trace_record_max_bytes are allocated, and the copy that
  // flattens the record may read no more words than the record has (aliased pointers, capnp's
  // amplification, are refused by the traversal limit).
  outcome read_one(kj::Array<capnp::word>& words, std::string& why) {
    unsigned char head[4];
    size_t got = read(head, 4);
    if (got == 0)
      return outcome::end;
    if (got < 4) {
      why = "the file ends inside a segment table";
      return outcome::cut;
    }
    uint64_t num_segments = uint64_t{le32(head)} + 1;
    if (num_segments > max_segments) {
      why = "its segment table claims " + std::to_string(num_segments) + " segments (at most " +
            std::to_string(max_segments) + ")";
      return outcome::damaged;
    }
    // The sizes, then padding to a whole word: 4 bytes each after the count.
    size_t table_bytes = static_cast<size_t>(4 * num_segments + (num_segments % 2 == 0 ? 4 : 0));
    std::vector<unsigned char> table(table_bytes);
    if (read(table.data(), table_bytes) < table_bytes) {
      why = "the file ends inside a segment table";
      return outcome::cut;
    }
    std::vector<uint32_t> sizes(num_segments);
    uint64_t total_words = 0;
    for (size_t i = 0; i < num_segments; ++i) {
      sizes[i] = le32(table.data() + 4 * i);
      total_words += sizes[i];
    }
    uint64_t total_bytes = total_words * sizeof(capnp::word);
    if (total_bytes > trace_record_max_bytes) {
      why = "its segment table claims " + bytes_text(total_bytes) + " (" + std::to_string(total_words) +
            " words; a record has at most " + bytes_text(trace_record_max_bytes) + ")";
      return outcome::damaged;
    }
    if (total_words == 0) {
      why = "its segment table claims no words (a record has at least its root pointer)";
      return outcome::damaged;
    }
    if (!has_left(total_bytes)) {
      why = "the record claims " + std::to_string(total_bytes) + " bytes, the file has " +
            std::to_string(file_bytes - std::min(file_bytes, offset)) + " left";
      return outcome::cut;
    }
    auto raw = kj::heapArray<capnp::word>(total_words);
    if (read(raw.begin(), total_bytes) < total_bytes) { // the file shrank while we read it
      why = "the file ends inside the record";
      return outcome::cut;
    }
    std::vector<kj::ArrayPtr<const capnp::word>> segments;
    size_t at = 0;
    for (uint32_t s : sizes) {
      segments.push_back(kj::arrayPtr(raw.begin() + at, s));
      at += s;
    }
    try {
      capnp::ReaderOptions opts;
      // A record reads each of its words once (getRoot charges the root pointer twice): aliased
      // pointers, which would copy one blob many times over, exceed this.
      opts.traversalLimitInWords = total_words + 8;
      opts.nestingLimit = record_nesting_limit;
      capnp::SegmentArrayMessageReader reader(kj::arrayPtr(segments.data(), segments.size()), opts);
      // The copy reads every pointer, so a bad one throws here and not later in a tool.
      capnp::MallocMessageBuilder copy(static_cast<unsigned>(total_words + 1));
      copy.setRoot(reader.getRoot<wire::TraceRecord>());
      words = capnp::messageToFlatArray(copy);
      // The copy knows no schema: read it with the schema, under the same bounds.
      opts.traversalLimitInWords = words.size() + 8;
      capnp::FlatArrayMessageReader typed(words.asPtr(), opts);
      read_every_field(typed.getRoot<capnp::DynamicStruct>(capnp::Schema::from<wire::TraceRecord>()));
    } catch (const kj::Exception& e) {
      why = "it does not decode: " + decode_error(e);
      return outcome::damaged;
    }
    return outcome::record;
  }

  static uint32_t le32(const unsigned char* p) {
    return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
};

namespace {

// The flattened copy is the reader's own: no aliasing, every pointer checked, so re-reading it
// (tools walk records more than once) needs no traversal limit.
capnp::ReaderOptions checked_copy_options() {
  capnp::ReaderOptions opts;
  opts.traversalLimitInWords = std::numeric_limits<uint64_t>::max();
  opts.nestingLimit = record_nesting_limit;
  return opts;
}

} // namespace

trace_reader::trace_reader(const std::string& path) : impl_(std::make_unique<impl>()) {
  impl_->path = path;
  impl_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl_->fd < 0)
    throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(impl_->fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": not a regular file, not a trace");
  impl_->file_bytes = static_cast<uint64_t>(st.st_size);
  std::string why;
  auto got = impl_->read_one(impl_->header_words, why);
  if (got == impl::outcome::end)
    throw std::runtime_error(path + ": empty file, not a trace");
  if (got != impl::outcome::record)
    throw std::runtime_error(path + ": not a trace file (its first record: " + why + ")");
  impl_->header = std::make_unique<capnp::FlatArrayMessageReader>(impl_->header_words.asPtr(), checked_copy_options());
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
  impl_->current_words = nullptr;
  uint64_t at = impl_->offset;
  std::string why;
  switch (impl_->read_one(impl_->current_words, why)) {
  case impl::outcome::end:
    return false;
  case impl::outcome::cut:
    truncation_ = "cut short after record " + std::to_string(count_) + " (" + why + ")";
    return false;
  case impl::outcome::damaged:
    throw std::runtime_error(impl_->path + ": record " + std::to_string(count_ + 1) + " (at byte " +
                             std::to_string(at) + ") is damaged: " + why);
  case impl::outcome::record:
    break;
  }
  impl_->current = std::make_unique<capnp::FlatArrayMessageReader>(impl_->current_words.asPtr(), checked_copy_options());
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
    out.readers.push_back(
        std::make_unique<capnp::FlatArrayMessageReader>(out.words.back().asPtr(), checked_copy_options()));
  }
  out.truncated = reader.truncated();
  out.truncation = reader.truncation();
  return out;
}

} // namespace ordo
