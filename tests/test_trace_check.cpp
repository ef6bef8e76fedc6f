// `ordo trace check` on synthetic traces: a step recorded as the step executor orders it
// (DESIGN §2.1) passes; each missing edge makes its rule fire, naming both records.
#include <catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "messages/trace/trace_check.hpp"

using namespace ordo;

namespace {

std::string temp_path(const char* name) {
  return "/tmp/ordo_test_trace_check_" + std::to_string(::getpid()) + "_" + name + ".trace";
}

struct temp_file {
  std::string path;
  explicit temp_file(const char* name) : path(temp_path(name)) {}
  ~temp_file() { std::remove(path.c_str()); }
};

struct drops {
  bool clear_load = false, load_forward = false, forward_save = false, upload_compute = false;
  bool save_join = false; // compute's wait for the saves' event
};

// Seqs of the interesting records of one step.
struct step_seqs {
  uint64_t upload = 0, clear = 0, load = 0, forward = 0, save = 0, complete = 0;
};

struct writer {
  trace_recorder rec;
  uint64_t next_event = 1;
  explicit writer(const std::string& path) : rec(path, header()) {}
  static trace_header_info header() {
    trace_header_info h;
    h.ordo_version = "test";
    return h;
  }

  uint64_t op(const command_header& step, device_op_kind kind, uint8_t stream, device_op o = {}) {
    o.op = kind;
    o.stream = stream;
    return rec.record_device_op(step, o);
  }
  uint64_t record(const command_header& step, uint8_t stream) {
    device_op o;
    o.event_id = next_event++;
    op(step, device_op_kind::event_record, stream, o);
    return o.event_id;
  }
  void wait(const command_header& step, uint8_t stream, uint64_t e) {
    device_op o;
    o.event_id = e;
    op(step, device_op_kind::event_wait, stream, o);
  }

  // One step as runtime/step_executor.cpp enqueues it: a clear of unit 5, a load into it, a
  // forward reading 5 and writing 6, a save of 6; `d` leaves edges out.
  step_seqs step(uint64_t seq, drops d = {}) {
    command_header h{1, seq};
    step_plan plan;
    plan.header = h;
    rec.message("scheduler", trace_direction::out, "model_runner", plan);
    rec.message("model_runner", trace_direction::in, "scheduler", plan);
    step_seqs s;
    device_op up;
    up.writes_inputs = true;
    s.upload = op(h, device_op_kind::upload, 1, up);
    uint64_t uploaded = record(h, 1);
    device_op clr;
    clr.units_written = {5};
    s.clear = op(h, device_op_kind::clear, 0, clr);
    uint64_t cleared = record(h, 0);
    if (!d.clear_load)
      wait(h, 1, cleared);
    device_op ld;
    ld.reads_inputs = true;
    ld.units_written = {5};
    ld.data_offset = 4096;
    ld.data_bytes = 512;
    s.load = op(h, device_op_kind::load, 1, ld);
    uint64_t loaded = record(h, 1);
    if (!d.load_forward)
      wait(h, 0, loaded);
    if (!d.upload_compute)
      wait(h, 0, uploaded);
    device_op fwd;
    fwd.reads_inputs = true;
    fwd.units_read = {5, 6};
    fwd.units_written = {6};
    fwd.slots_read = {0};
    fwd.slots_written = {0};
    s.forward = op(h, device_op_kind::forward, 0, fwd);
    uint64_t produced = record(h, 0);
    if (!d.forward_save)
      wait(h, 2, produced);
    device_op sv;
    sv.reads_inputs = true;
    sv.units_read = {6};
    sv.data_offset = 8192;
    sv.data_bytes = 512;
    s.save = op(h, device_op_kind::save, 2, sv);
    uint64_t saved = record(h, 2);
    if (!d.save_join)
      wait(h, 0, saved);
    op(h, device_op_kind::output_copy, 0);
    s.complete = op(h, device_op_kind::complete, 0);
    device_op done;
    done.op_seq = s.forward;
    op(h, device_op_kind::done, 0, done); // timing only
    step_done sd;
    sd.header = h;
    rec.message("model_runner", trace_direction::in, "device", sd);
    rec.message("model_runner", trace_direction::out, "scheduler", sd);
    rec.message("scheduler", trace_direction::in, "model_runner", sd);
    return s;
  }
};

trace_check_result check_file(const std::string& path) { return check_trace(read_trace(path)); }

} // namespace

TEST_CASE("steps ordered as DESIGN §2.1 pass") {
  temp_file f("clean");
  {
    writer w(f.path);
    for (uint64_t s = 1; s <= 3; ++s)
      w.step(s);
  }
  auto r = check_file(f.path);
  INFO(r.summary());
  CHECK_FALSE(r.violation);
  CHECK(r.steps == 3);
  CHECK(r.messages_matched == 6);
  CHECK(r.unmatched == 0);
  CHECK_FALSE(r.truncated);
  CHECK(r.summary().find("no violation") != std::string::npos);
}

TEST_CASE("a load without the wait for the clears breaks clear_before_load") {
  temp_file f("clear_load");
  step_seqs s;
  {
    writer w(f.path);
    w.step(1);
    drops d;
    d.clear_load = true;
    s = w.step(2, d);
  }
  auto r = check_file(f.path);
  REQUIRE(r.violation);
  CHECK(r.violation->rule == "clear_before_load");
  CHECK(r.violation->first_seq == s.clear);
  CHECK(r.violation->second_seq == s.load);
  auto text = r.summary();
  CHECK(text.find("VIOLATION clear_before_load: record " + std::to_string(s.clear)) != std::string::npos);
  CHECK(text.find("record " + std::to_string(s.load) + " (load on load stream, step 1.2)") != std::string::npos);
  CHECK(text.find("unit 5") != std::string::npos);
}

TEST_CASE("a forward reading loaded units without the load stream's event breaks load_before_use") {
  temp_file f("load_forward");
  step_seqs s;
  {
    writer w(f.path);
    drops d;
    d.load_forward = true;
    s = w.step(1, d);
  }
  auto r = check_file(f.path);
  REQUIRE(r.violation);
  CHECK(r.violation->rule == "load_before_use");
  CHECK(r.violation->first_seq == s.load);
  CHECK(r.violation->second_seq == s.forward);
}

TEST_CASE("a save without the wait for the forward breaks produce_before_save") {
  temp_file f("forward_save");
  step_seqs s;
  {
    writer w(f.path);
    drops d;
    d.forward_save = true;
    s = w.step(1, d);
  }
  auto r = check_file(f.path);
  REQUIRE(r.violation);
  CHECK(r.violation->rule == "produce_before_save");
  CHECK(r.violation->first_seq == s.forward);
  CHECK(r.violation->second_seq == s.save);
}

TEST_CASE("a forward without the wait for the upload breaks upload_before_compute") {
  temp_file f("upload_compute");
  step_seqs s;
  {
    writer w(f.path);
    drops d;
    d.upload_compute = true;
    d.load_forward = true; // else compute would wait for the upload through the loads' event
    d.clear_load = false;
    s = w.step(1, d);
  }
  auto r = check_file(f.path);
  REQUIRE(r.violation);
  // The forward reads unit 5 (loaded) before the inputs: the unit comes first.
  CHECK(r.violation->second_seq == s.forward);
  CHECK(r.violation->rule == "load_before_use");

  temp_file g("upload_compute_only");
  {
    writer w(g.path);
    drops d;
    d.upload_compute = true;
    command_header h{1, 1};
    step_plan plan;
    plan.header = h;
    w.rec.message("scheduler", trace_direction::out, "model_runner", plan);
    w.rec.message("model_runner", trace_direction::in, "scheduler", plan);
    device_op up;
    up.writes_inputs = true;
    s.upload = w.op(h, device_op_kind::upload, 1, up);
    w.record(h, 1);
    device_op fwd;
    fwd.reads_inputs = true;
    fwd.units_read = {1};
    fwd.units_written = {1};
    s.forward = w.op(h, device_op_kind::forward, 0, fwd);
    w.op(h, device_op_kind::complete, 0);
  }
  auto r2 = check_file(g.path);
  REQUIRE(r2.violation);
  CHECK(r2.violation->rule == "upload_before_compute");
  CHECK(r2.violation->first_seq == s.upload);
  CHECK(r2.violation->second_seq == s.forward);
  CHECK(r2.summary().find("the inputs buffer") != std::string::npos);
}

TEST_CASE("the next step's upload is ordered after the last step through its completion") {
  temp_file f("no_plan_chain");
  {
    writer w(f.path);
    w.step(1);
    // Step 2's upload rewrites the inputs buffer step 1's forward read: ordered by the complete
    // op → the runner's in step_done from the device → the runner's later records.
    command_header h{1, 2};
    device_op up;
    up.writes_inputs = true;
    w.op(h, device_op_kind::upload, 1, up);
  }
  auto r = check_file(f.path);
  CHECK_FALSE(r.violation);
}

// The store grants the object at offset 8192 (the step's save), then commits it after step 2.
void commit_after(writer& w, uint64_t step_seq, bool join_save, uint64_t* commit_seq) {
  object_key key{1, 0xfeed, 0};
  store_step reserve;
  reserve.header = {1, 1};
  w.rec.message("connector", trace_direction::out, "store", reserve);
  w.rec.message("store", trace_direction::in, "connector", reserve);
  store_step_done granted;
  granted.header = {1, 1};
  granted.reserves.push_back({key, true, "ok", 8192, 512});
  w.rec.message("store", trace_direction::out, "connector", granted);
  w.rec.message("connector", trace_direction::in, "store", granted);
  drops d;
  d.save_join = !join_save;
  w.step(step_seq, d);
  store_step commit; // a shortcut for step_done → scheduler → connector → store: its own channel
  commit.header = {1, 1};
  commit.commits.push_back(key);
  w.rec.message("scheduler", trace_direction::out, "store", commit);
  *commit_seq = w.rec.message("store", trace_direction::in, "scheduler", commit);
}

TEST_CASE("a commit after the step that saved the object passes; one its save may not precede breaks commit_after_save") {
  temp_file f("commit");
  uint64_t at = 0;
  {
    writer w(f.path);
    commit_after(w, 1, true, &at);
  }
  auto r = check_file(f.path);
  INFO(r.summary());
  CHECK_FALSE(r.violation);
  CHECK(r.commits_checked == 1);

  temp_file g("commit_early");
  {
    writer w(g.path);
    commit_after(w, 1, false, &at);
  }
  auto r2 = check_file(g.path);
  REQUIRE(r2.violation);
  CHECK(r2.violation->rule == "commit_after_save");
  CHECK(r2.violation->second_seq == at);
  CHECK(r2.summary().find("arena offset 8192") != std::string::npos);
}

TEST_CASE("a gap in a channel's command seqs breaks seq_contiguous") {
  temp_file f("seq_gap");
  uint64_t second = 0, third = 0;
  {
    writer w(f.path);
    for (uint64_t s : {1, 2, 4}) {
      pool_step ps;
      ps.header = {1, s};
      w.rec.message("scheduler", trace_direction::out, "block_pool", ps);
      uint64_t at = w.rec.message("block_pool", trace_direction::in, "scheduler", ps);
      (s == 2 ? second : third) = at;
    }
    pool_step ps; // a new epoch starts at 1: fine
    ps.header = {2, 1};
    w.rec.message("scheduler", trace_direction::out, "block_pool", ps);
    w.rec.message("block_pool", trace_direction::in, "scheduler", ps);
  }
  auto r = check_file(f.path);
  REQUIRE(r.violation);
  CHECK(r.violation->rule == "seq_contiguous");
  CHECK(r.violation->first_seq == second);
  CHECK(r.violation->second_seq == third);
  CHECK(r.summary().find("expected step 1.3") != std::string::npos);
}

TEST_CASE("a received message without its send is a warning, not a violation") {
  temp_file f("unmatched");
  {
    writer w(f.path);
    w.step(1);
    pool_step ps;
    ps.header = {1, 1};
    w.rec.message("block_pool", trace_direction::in, "scheduler", ps);
  }
  auto r = check_file(f.path);
  CHECK_FALSE(r.violation);
  CHECK(r.unmatched == 1);
  CHECK(r.warning().find("without a matching send") != std::string::npos);
}

TEST_CASE("a file cut short reports the cut and checks the records before it") {
  temp_file f("cut");
  {
    writer w(f.path);
    for (uint64_t s = 1; s <= 3; ++s)
      w.step(s);
  }
  std::string bytes;
  {
    std::ifstream in(f.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  REQUIRE(bytes.size() > 40);
  {
    std::ofstream out(f.path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 20));
  }
  auto r = check_file(f.path);
  CHECK(r.truncated);
  CHECK_FALSE(r.violation);
  CHECK(r.records > 0);
  CHECK(r.summary().find("; file cut short after record " + std::to_string(r.last_seq) + ": checked up to there") !=
        std::string::npos);

  // A violation before the cut is still found.
  {
    writer w(f.path);
    drops d;
    d.clear_load = true;
    w.step(1, d);
    w.step(2);
  }
  {
    std::ifstream in(f.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(f.path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 20));
  }
  auto r2 = check_file(f.path);
  CHECK(r2.truncated);
  REQUIRE(r2.violation);
  CHECK(r2.violation->rule == "clear_before_load");
}

TEST_CASE("seq_contiguous keeps one channel per sender: a store server's sessions each count from 1") {
  temp_file f("sessions");
  {
    writer w(f.path);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      store_step s;
      s.header = {1, seq};
      w.rec.message("connector", trace_direction::out, "store_server", s);
      w.rec.message("store_server", trace_direction::in, "connector", s);
    }
    store_step other;
    other.header = {1, 1}; // a peer's session: its own channel
    w.rec.message("store_server", trace_direction::in, "remote-7@1", other);
  }
  auto r = check_file(f.path);
  INFO(r.summary());
  CHECK_FALSE(r.violation);

  temp_file g("sessions_gap");
  {
    writer w(g.path);
    store_step a;
    a.header = {1, 1};
    w.rec.message("store_server", trace_direction::in, "remote-7@1", a);
    store_step b;
    b.header = {1, 3}; // the same sender skipped seq 2
    w.rec.message("store_server", trace_direction::in, "remote-7@1", b);
  }
  auto r2 = check_file(g.path);
  REQUIRE(r2.violation);
  CHECK(r2.violation->rule == "seq_contiguous");
}
