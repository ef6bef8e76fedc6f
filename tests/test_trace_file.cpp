// Trace files: what the recorder writes, the reader gives back, in order; a file cut inside a
// record reads up to its last whole record and says so; a damaged record (a size over the cap,
// too many segments, aliased or mistyped pointers) is refused once, naming the record and byte.
#include <catch.hpp>

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "messages/trace/trace_file.hpp"

using namespace ordo;

namespace {

std::string temp_path(const char* name) {
  return "/tmp/ordo_test_" + std::to_string(::getpid()) + "_" + name + ".trace";
}

void write_sample(const std::string& path, int steps) {
  trace_header_info info;
  info.ordo_version = "test";
  info.config_text = "[model]\npreset = \"dense\"\n";
  info.namespace_id = 42;
  info.chaos_seed = 7;
  trace_recorder rec(path, info);
  for (int s = 1; s <= steps; ++s) {
    pool_step ps;
    ps.header = {1, static_cast<uint64_t>(s)};
    rec.message("scheduler", trace_direction::out, "block_pool", ps);
    rec.message("block_pool", trace_direction::in, "scheduler", ps);
    device_op op;
    op.op = device_op_kind::load;
    op.stream = 1;
    op.units_written = {3, 4, 5};
    op.data_offset = 4096;
    rec.record_device_op({1, static_cast<uint64_t>(s)}, op);
  }
  completion_request req;
  req.request_id = 9;
  req.prompt = {1, 2, 3};
  rec.message("scheduler", trace_direction::in, "frontend", req);
  rec.flush();
  CHECK(rec.records_written() == static_cast<uint64_t>(3 * steps + 1));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Byte offsets of each framed record (the header first).
std::vector<size_t> record_offsets(const std::string& bytes) {
  std::vector<size_t> at;
  size_t pos = 0;
  while (pos + 8 <= bytes.size()) {
    at.push_back(pos);
    uint32_t n = 0, words = 0;
    std::memcpy(&n, bytes.data() + pos, 4);
    ++n;
    for (uint32_t i = 0; i < n; ++i) {
      uint32_t w = 0;
      std::memcpy(&w, bytes.data() + pos + 4 + 4 * i, 4);
      words += w;
    }
    pos += 4 + 4 * n + (n % 2 == 0 ? 4 : 0) + 8ull * words;
  }
  return at;
}

void put32(std::string& bytes, size_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); }

// One framed record (one segment) of raw words: a completion_request whose `num_stops` stop
// sequences all point at one list of `num_tokens` tokens (capnp's amplification: copied, it is
// num_stops times its size).
std::string aliasing_record(uint64_t num_stops, uint64_t num_tokens) {
  auto struct_ptr = [](uint64_t offset, uint64_t data, uint64_t ptrs) { return offset << 2 | data << 32 | ptrs << 48; };
  auto list_ptr = [](uint64_t offset, uint64_t size_kind, uint64_t count) {
    return 1 | offset << 2 | size_kind << 32 | count << 35;
  };
  std::vector<uint64_t> w;
  w.push_back(struct_ptr(0, 5, 4));               // root: TraceRecord, 5 data words, 4 pointers
  w.insert(w.end(), {1, 0, 0, 0, uint64_t{5} << 16}); // seq 1; payload tag 5 (completionRequest)
  w.insert(w.end(), {0, 0, 0});                   // actor, peer, kind
  w.push_back(struct_ptr(0, 4, 6));               // payload: CompletionRequest
  w.insert(w.end(), {0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  size_t stop = w.size() - 3, tag = w.size();     // stop is pointer 3 of 6
  w[stop] = list_ptr(tag - stop - 1, 7, num_stops);
  w.push_back(num_stops << 2 | uint64_t{1} << 48); // tag: num_stops structs of 0 data, 1 pointer
  size_t blob = tag + 1 + num_stops;
  for (uint64_t i = 0; i < num_stops; ++i)
    w.push_back(list_ptr(blob - (tag + 1 + i) - 1, 4, num_tokens)); // List(Int32) → the blob
  w.resize(w.size() + (num_tokens + 1) / 2, 0);
  std::string out(8, '\0');
  put32(out, 4, static_cast<uint32_t>(w.size()));
  out.append(reinterpret_cast<const char*>(w.data()), w.size() * 8);
  return out;
}

} // namespace

TEST_CASE("a trace file reads back every record in sequence order") {
  auto path = temp_path("whole");
  write_sample(path, 5);
  trace_reader r(path);
  CHECK(r.header().getSchemaVersion() == trace_schema_version);
  CHECK(r.header().getNamespaceId() == 42);
  CHECK(r.header().getChaosSeed() == 7);
  uint64_t expect = 1, last_ts = 0;
  int loads = 0;
  while (r.next()) {
    auto rec = r.record();
    CHECK(rec.getSeq() == expect++);
    CHECK(rec.getTsNs() >= last_ts);
    last_ts = rec.getTsNs();
    if (rec.getPayload().isDeviceOp()) {
      ++loads;
      CHECK(rec.getPayload().getDeviceOp().getUnitsWritten().size() == 3);
      CHECK(std::string(rec.getKind().cStr()) == "load");
    }
  }
  CHECK_FALSE(r.truncated());
  CHECK(r.count() == 16);
  CHECK(loads == 5);
  auto all = read_trace(path);
  REQUIRE(all.size() == 16);
  auto last = all[15];
  REQUIRE(last.getPayload().isCompletionRequest());
  auto req = from_capnp(last.getPayload().getCompletionRequest());
  CHECK(req.prompt == std::vector<int32_t>{1, 2, 3});
  CHECK(std::string(last.getKind().cStr()) == "completion_request");
  CHECK(all[0].getStepSeq() == 1);
  ::unlink(path.c_str());
}

TEST_CASE("a trace cut inside a record reads up to its last whole record") {
  auto path = temp_path("cut");
  write_sample(path, 3);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  in.close();
  REQUIRE(bytes.size() > 40);
  for (size_t cut : {bytes.size() - 1, bytes.size() - 9}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(cut));
    auto all = read_trace(path);
    CHECK(all.truncated);
    CHECK(all.size() == 9); // the completion request was cut
    CHECK(all.truncation.find("after record 9") != std::string::npos);
  }
  ::unlink(path.c_str());
}

TEST_CASE("a file that is not a trace is refused with its name") {
  auto path = temp_path("junk");
  std::ofstream(path) << "hello, this is not a trace file at all, not even close";
  CHECK_THROWS_WITH(trace_reader(path), Catch::Contains(path));
  CHECK_THROWS_WITH(trace_reader("/nonexistent/x.trace"), Catch::Contains("/nonexistent/x.trace"));
  ::unlink(path.c_str());
}

TEST_CASE("a record claiming more than the cap is refused before allocating, naming record and byte") {
  auto path = temp_path("huge");
  write_sample(path, 3);
  std::string bytes = read_bytes(path);
  auto at = record_offsets(bytes);
  REQUIRE(at.size() == 11);
  put32(bytes, at[4] + 4, 1u << 30); // record 4 claims 2^30 words (8 GiB)
  write_bytes(path, bytes);
  trace_reader r(path);
  for (int i = 0; i < 3; ++i)
    CHECK(r.next());
  CHECK_THROWS_WITH(r.next(), Catch::Contains(path + ": record 4 (at byte " + std::to_string(at[4]) +
                                              ") is damaged: its segment table claims 8 GiB") &&
                                  Catch::Contains("at most 16 MiB"));
  CHECK_THROWS_WITH(read_trace(path), Catch::Contains("record 4"));

  write_sample(path, 3);
  bytes = read_bytes(path);
  put32(bytes, at[2], 0xffffffffu); // 2^32 segments
  write_bytes(path, bytes);
  CHECK_THROWS_WITH(read_trace(path), Catch::Contains("record 2 (at byte " + std::to_string(at[2]) +
                                                      ") is damaged: its segment table claims 4294967296 segments"));

  bytes.resize(72); // the header alone claims 2^30 words: not a trace
  put32(bytes, 4, 1u << 30);
  write_bytes(path, bytes);
  CHECK_THROWS_WITH(trace_reader(path), Catch::Contains("not a trace file") && Catch::Contains("8 GiB"));
  ::unlink(path.c_str());
}

TEST_CASE("a record whose pointers alias one list is refused, not copied a thousand times") {
  auto path = temp_path("alias");
  write_sample(path, 1);
  std::string bytes = read_bytes(path);
  write_bytes(path, bytes + aliasing_record(2, 4) + aliasing_record(1000, 2 * 120000));
  trace_reader r(path);
  for (int i = 0; i < 4; ++i)
    REQUIRE(r.next());
  // Two stops sharing four tokens: 2 × 2 words more than the record has, within the slack.
  REQUIRE(r.next());
  CHECK(from_capnp(r.record().getPayload().getCompletionRequest()).stop.size() == 2);
  CHECK_THROWS_WITH(r.next(), Catch::Contains("record 6 (at byte ") && Catch::Contains("traversal limit"));
  ::unlink(path.c_str());
}

TEST_CASE("a pointer of the wrong kind is refused when the record is read, not when a tool reads it") {
  auto path = temp_path("kind");
  write_sample(path, 1);
  std::string bytes = read_bytes(path);
  auto at = record_offsets(bytes);
  // Record 1 (a pool_step, one segment): its root TraceRecord's `actor` (pointer 0, word 6 of the
  // segment) becomes a struct pointer to the same bytes, one data word: in bounds, so a copy that
  // knows no schema takes it; only reading it as the Text it must be finds it wrong.
  size_t actor = at[1] + 8 + 6 * 8;
  uint64_t ptr = 0;
  std::memcpy(&ptr, bytes.data() + actor, 8);
  REQUIRE((ptr & 3) == 1); // a list pointer (the Text)
  ptr = (ptr & 0xfffffffcull) | uint64_t{1} << 32;
  std::memcpy(bytes.data() + actor, &ptr, 8);
  write_bytes(path, bytes);
  trace_reader r(path);
  CHECK_THROWS_WITH(r.next(), Catch::Contains("record 1 (at byte " + std::to_string(at[1]) + ") is damaged: it does not decode"));
  ::unlink(path.c_str());
}

TEST_CASE("a record just under the cap reads back; one over it is refused") {
  auto path = temp_path("big");
  trace_header_info info;
  info.ordo_version = "test";
  {
    trace_recorder rec(path, info);
    completion_request req;
    req.request_id = 1;
    req.prompt.assign(3'500'000, 7); // 14 MB, several segments
    rec.message("scheduler", trace_direction::in, "frontend", req);
    req.request_id = 2;
    req.prompt.assign(4'500'000, 7); // 18 MB
    rec.message("scheduler", trace_direction::in, "frontend", req);
  }
  trace_reader r(path);
  REQUIRE(r.next());
  CHECK(r.record().getPayload().getCompletionRequest().getPrompt().size() == 3'500'000);
  CHECK_THROWS_WITH(r.next(), Catch::Contains("record 2") && Catch::Contains("at most 16 MiB"));
  ::unlink(path.c_str());
}
