// A trace recorded by an earlier build (tests/data/golden.trace, made by
// tools/make_golden_trace.sh) still decodes: the schema is append-only, so every record, every
// message in it and the values a user would look for read back as they were written.
#include <catch.hpp>

#include <map>
#include <set>
#include <string>

#include "messages/compare.hpp"
#include "messages/trace/trace_check.hpp"
#include "messages/trace/trace_file.hpp"
#include "runtime/config.hpp"

using namespace ordo;

TEST_CASE("the golden trace decodes: header, every record, every message") {
  auto trace = read_trace("tests/data/golden.trace");
  CHECK_FALSE(trace.truncated);
  auto h = trace.header();
  CHECK(h.getSchemaVersion() == 1);
  CHECK(std::string(h.getNode().cStr()) == "golden");
  CHECK(h.getChaosSeed() == 11);
  auto cfg = parse_config(h.getConfigText().cStr());
  CHECK(cfg.block_size == 16);
  CHECK(cfg.connector == connector_kind::offload);
  CHECK(cfg.preset == model_preset::qsa_gdn_ple);

  REQUIRE(trace.size() > 400);
  std::map<std::string, int> kinds;
  std::set<std::string> actors;
  int messages = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    auto r = trace[i];
    CHECK(r.getSeq() == i + 1);
    kinds[r.getKind().cStr()]++;
    actors.insert(r.getActor().cStr());
    auto m = decode_trace_message(r);
    if (!m)
      continue;
    ++messages;
    // Every message survives a round trip through the current converter unchanged.
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (!std::is_same_v<T, std::string>) {
            CHECK(decode_message<T>(encode_message(x)) == x);
            CHECK(std::string(wire_type<T>::name) == r.getKind().cStr());
          }
        },
        *m);
  }
  CHECK(messages > 250);
  CHECK(actors == std::set<std::string>{"frontend", "scheduler", "block_pool", "connector", "store", "model_runner"});
  for (const char* k : {"completion_request", "completion_chunk", "completion_result", "evict_request", "evict_result",
                        "step_plan", "step_done", "pool_step", "pool_step_done", "connector_lookup",
                        "connector_lookup_done", "connector_step", "connector_step_done", "store_contains",
                        "store_contains_done", "store_step", "store_step_done", "store_verdict", "upload", "clear",
                        "load", "restore", "forward", "checkpoint_copy", "save", "output_copy", "event_record",
                        "event_wait", "complete", "done"})
    CHECK(kinds[k] > 0);
}

TEST_CASE("the golden trace keeps the values it was recorded with") {
  auto trace = read_trace("tests/data/golden.trace");
  std::vector<completion_request> requests;
  std::vector<completion_result> results;
  uint64_t loads = 0, load_units = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    auto r = trace[i];
    auto p = r.getPayload();
    std::string actor = r.getActor().cStr();
    if (actor == "scheduler" && p.isCompletionRequest())
      requests.push_back(from_capnp(p.getCompletionRequest()));
    if (actor == "frontend" && p.isCompletionResult())
      results.push_back(from_capnp(p.getCompletionResult()));
    if (p.isDeviceOp() && p.getDeviceOp().getOp() == wire::DeviceOpKind::LOAD) {
      ++loads;
      load_units += p.getDeviceOp().getUnitsWritten().size();
      CHECK(p.getDeviceOp().getStream() == 1);
      CHECK(p.getDeviceOp().getDataBytes() > 0);
    }
  }
  REQUIRE(requests.size() == 3);
  CHECK(requests[0].prompt.size() == 69);
  CHECK(requests[0].prompt.front() == 1);
  CHECK(requests[0].max_tokens == 4);
  CHECK(requests[1].stream);
  CHECK(requests[2].prompt == requests[0].prompt);
  REQUIRE(results.size() == 3);
  // The resend came back from the host tier with the cold run's digest.
  CHECK(results[2].from_cpu > 0);
  CHECK(results[2].logits_digest == results[0].logits_digest);
  CHECK(results[2].token_ids == results[0].token_ids);
  CHECK(loads > 0);
  CHECK(load_units > 0);
}

TEST_CASE("the golden trace checks clean and its messages all match") {
  auto trace = read_trace("tests/data/golden.trace");
  auto result = check_trace(trace);
  CHECK_FALSE(result.violation);
  CHECK(result.unmatched == 0);
  CHECK(result.steps > 10);
  CHECK(result.messages_matched > 100);
}
