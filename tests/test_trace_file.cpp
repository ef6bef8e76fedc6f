// Trace files: what the recorder writes, the reader gives back, in order; a file cut inside a
// record reads up to its last whole record and says so.
#include <catch.hpp>

#include <unistd.h>

#include <fstream>
#include <string>

#include "messages/trace_file.hpp"

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
