#include <catch.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <stdexcept>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <capnp/message.h>
#include <capnp/schema.h>
#include <capnp/serialize.h>

#include "messages/capnp_convert.hpp"
#include "messages/compare.hpp"

using namespace ordo;

namespace {

constexpr uint64_t big = (uint64_t{1} << 53) + 1; // not representable as a double

template <class T>
T round_trip(const T& x) {
  return decode_message<T>(encode_message(x));
}

template <class T>
struct is_vec : std::false_type {};
template <class T>
struct is_vec<std::vector<T>> : std::true_type {};

// Sets every declared field, recursively, to a value distinct from its default and from every
// other field, so a converter that drops or swaps a field fails the round trip. Driven by the
// named visitor of the struct's ORDO_FIELDS line: fields appended there are covered without
// editing this test.
class filler {
public:
  template <class T>
  void operator()(field_name, T& x) {
    fill(x);
  }

  template <class T>
  void fill(T& x) {
    ++n_;
    if constexpr (std::is_same_v<T, bool>) {
      x = !x;
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      x = static_cast<uint8_t>(100 + n_ % 100);
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      x = static_cast<T>(-1000 - n_);
    } else if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>((uint64_t{1} << 60) + 3 * n_);
    } else if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(-0.1 - n_);
    } else if constexpr (std::is_enum_v<T>) { // the next enumerator: valid and not the default
      x = static_cast<T>(static_cast<std::underlying_type_t<T>>(x) + 1);
    } else if constexpr (std::is_same_v<T, std::string>) {
      x = "field " + std::to_string(n_) + " h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9F\x98\x80";
    } else if constexpr (is_vec<T>::value) {
      x.resize(3);
      for (auto& e : x)
        fill(e);
    } else {
      for_each_field(x, *this);
    }
  }

private:
  int64_t n_ = 0;
};

template <class T>
T filled() {
  T x;
  filler f;
  f.fill(x);
  return x;
}

// Every type of ORDO_FOR_EACH_WIRE_TYPE, as a type list for TEMPLATE_LIST_TEST_CASE.
#define ORDO_TUPLE_OF(cpp_type, wire_struct) std::tuple<cpp_type>{},
using wire_types = decltype(std::tuple_cat(ORDO_FOR_EACH_WIRE_TYPE(ORDO_TUPLE_OF) std::tuple<>{}));
#undef ORDO_TUPLE_OF

// Counts the fields CAF's inspect passes.
struct inspect_counter {
  using result_type = void;
  size_t n = 0;
  template <class... Ts>
  void operator()(Ts&...) {
    n += sizeof...(Ts);
  }
};

std::string camel_case(const std::string& snake) {
  std::string out;
  for (size_t i = 0; i < snake.size(); ++i)
    if (snake[i] == '_' && i + 1 < snake.size())
      out += static_cast<char>(std::toupper(static_cast<unsigned char>(snake[++i])));
    else
      out += snake[i];
  return out;
}

// Wire fields deliberately absent from the C++ struct, as "Struct.field" (none today; each entry
// needs a reason next to it).
const std::set<std::string> absent_from_cpp = {};

std::vector<uint8_t> bytes_of(capnp::MallocMessageBuilder& m) {
  auto words = capnp::messageToFlatArray(m);
  auto b = words.asBytes();
  return std::vector<uint8_t>(b.begin(), b.end());
}

} // namespace

TEMPLATE_LIST_TEST_CASE("every declared field survives a round trip", "[capnp]", wire_types) {
  const TestType x = filled<TestType>();
  REQUIRE(x != TestType{}); // the filler changed something
  const TestType y = round_trip(x);
  CHECK(to_debug_string(y) == to_debug_string(x));
  CHECK(y == x);
  // Defaults round-trip too (schema defaults mirror the C++ ones).
  CHECK(round_trip(TestType{}) == TestType{});
}

TEMPLATE_LIST_TEST_CASE("every C++ field has a wire field of its name and vice versa", "[capnp]",
                        wire_types) {
  using wire = typename wire_type<TestType>::type;
  const capnp::StructSchema schema = capnp::Schema::from<wire>();
  const std::string wire_struct = schema.getUnqualifiedName().cStr();

  std::vector<std::string> cpp_wire_names;
  for_each_field(TestType{}, [&](field_name n, const auto&) {
    cpp_wire_names.push_back(n.wire ? n.wire : camel_case(n.cpp));
  });
  inspect_counter counted;
  TestType probe;
  inspect(counted, probe);
  CHECK(counted.n == cpp_wire_names.size()); // inspect (CAF) and for_each_field agree

  size_t absent = 0;
  for (auto f : schema.getFields()) {
    const std::string name = f.getProto().getName().cStr();
    const bool declared =
        std::find(cpp_wire_names.begin(), cpp_wire_names.end(), name) != cpp_wire_names.end();
    if (absent_from_cpp.count(wire_struct + "." + name)) {
      CHECK(!declared);
      ++absent;
    } else {
      INFO(wire_struct << "." << name << " has no C++ field of that (camelCase) name");
      CHECK(declared);
    }
  }
  INFO(wire_type<TestType>::name << " declares " << cpp_wire_names.size() << " fields, "
                                 << wire_struct << " has " << schema.getFields().size());
  CHECK(cpp_wire_names.size() == schema.getFields().size() - absent);
  // The converter's own check (a C++ field without a wire field throws std::logic_error).
  CHECK_NOTHROW(encode_message(TestType{}));
}

TEST_CASE("bytes written by the typed capnp builders decode by field name", "[capnp]") {
  // The old converters wrote each field through its generated setter (by ordinal); these bytes
  // are built the same way and must decode to the same structs through the name matching.
  {
    capnp::MallocMessageBuilder m;
    auto b = m.initRoot<wire::CompletionResult>();
    b.setRequestId(big);
    auto ids = b.initTokenIds(3);
    ids.set(0, 5);
    ids.set(1, -6);
    ids.set(2, 7);
    b.setFinishReason("length");
    b.setPromptTokens(11);
    b.setCachedTokens(12);
    b.setResumeAt(13);
    b.setFromHbm(14);
    b.setFromCpu(15);
    b.setFromStore(16);
    b.setReason("no image \xE2\x80\x94 at 256");
    b.setLogitsDigest(0xfedcba9876543211ull);
    b.setNumPreemptions(17);
    b.setDurationMs(18.5);
    b.setFirstTokenMs(-19.25);
    auto gaps = b.initInterTokenMs(2);
    gaps.set(0, 0.5f);
    gaps.set(1, -1.5f);
    b.setReasonKind(wire::ResumeReason::HOST_LOAD_FAILED);

    completion_result want;
    want.request_id = big;
    want.token_ids = {5, -6, 7};
    want.finish_reason = "length";
    want.prompt_tokens = 11;
    want.cached_tokens = 12;
    want.resume_at = 13;
    want.from_hbm = 14;
    want.from_cpu = 15;
    want.from_store = 16;
    want.reason = "no image \xE2\x80\x94 at 256";
    want.logits_digest = 0xfedcba9876543211ull;
    want.num_preemptions = 17;
    want.duration_ms = 18.5;
    want.first_token_ms = -19.25;
    want.inter_token_ms = {0.5f, -1.5f};
    want.reason_kind = resume_reason::host_load_failed;
    const auto bytes = bytes_of(m);
    CHECK(decode_message<completion_result>(bytes) == want);
    CHECK(encode_message(want) == bytes); // and the same bytes come back out
  }
  {
    capnp::MallocMessageBuilder m;
    auto b = m.initRoot<wire::StepPlan>();
    b.initHeader().setEpoch(3);
    b.getHeader().setSeq(big);
    auto reqs = b.initRequests(1);
    reqs[0].setRequestId(9);
    reqs[0].setStateSlot(2);
    reqs[0].setResetState(true);
    reqs[0].setFirstPosition(64);
    reqs[0].initTokenIds(1).set(0, 42);
    auto table = reqs[0].initBlockTable(2);
    table.set(0, 4);
    table.set(1, 1);
    reqs[0].setSample(true);
    reqs[0].setTemperature(0.75f);
    reqs[0].setSeed(UINT64_MAX);
    b.initClears(1).set(0, -1);
    auto copies = b.initCheckpointCopies(1);
    copies[0].setRequestId(9);
    copies[0].setStateSlot(2);
    copies[0].setPosition(128);
    copies[0].initUnits(1).set(0, 77);
    auto loads = b.initLoads(1);
    loads[0].setRequestId(10);
    loads[0].setKind(1);
    loads[0].setDataOffset(4096);
    loads[0].setDataBytes(8192);
    loads[0].initUnits(2).set(1, -1);

    step_plan want;
    want.header = {3, big};
    want.requests = {{9, 2, true, 64, {42}, {4, 1}, true, 0.75f, UINT64_MAX}};
    want.clears = {-1};
    want.checkpoint_copies = {{9, 2, 128, {77}}};
    want.loads = {{10, 1, 4096, 8192, {0, -1}}};
    CHECK(decode_message<step_plan>(bytes_of(m)) == want);
  }
  {
    capnp::MallocMessageBuilder m;
    auto b = m.initRoot<wire::ConnectorStepDone>();
    b.initHeader().setSeq(5);
    auto saves = b.initSaves(1);
    saves[0].setRequestId(8);
    saves[0].initKey().setNamespaceId(7);
    saves[0].getKey().setHash(big);
    saves[0].getKey().setKind(1);
    saves[0].setOk(true);
    saves[0].setStatus("ok");
    saves[0].setDataOffset(64);
    saves[0].setDataBytes(128);
    auto stats = b.initStats();
    stats.setNumObjects(1);
    stats.setRejectedTotal(-10);
    stats.setAbortsTotal(12);
    b.setNumEvicted(-3);
    b.setGranularity("chunk");

    connector_step_done want;
    want.header = {0, 5};
    want.saves = {{8, {7, big, 1}, true, "ok", 64, 128}};
    want.stats.num_objects = 1;
    want.stats.rejected_total = -10;
    want.stats.aborts_total = 12;
    want.num_evicted = -3;
    want.granularity = "chunk";
    CHECK(decode_message<connector_step_done>(bytes_of(m)) == want);
  }
  {
    capnp::MallocMessageBuilder m;
    auto b = m.initRoot<wire::StoreContainsDone>();
    b.setNumLeadingCommitted(2);
    auto present = b.initPresent(3);
    present.set(0, 1);
    present.set(1, 1);
    present.set(2, 0);
    CHECK(decode_message<store_contains_done>(bytes_of(m)) == store_contains_done{2, {1, 1, 0}, ""});
    b.setGranularity("chunk");
    CHECK(decode_message<store_contains_done>(bytes_of(m)) == store_contains_done{2, {1, 1, 0}, "chunk"});
  }
  {
    // Fields left unset decode to the schema defaults, which mirror the C++ ones.
    capnp::MallocMessageBuilder m;
    auto b = m.initRoot<wire::CompletionRequest>();
    b.setRequestId(4);
    completion_request want;
    want.request_id = 4;
    CHECK(decode_message<completion_request>(bytes_of(m)) == want);
    CHECK(decode_message<completion_request>(bytes_of(m)).max_tokens == 16);
  }
}

TEST_CASE("request messages round-trip with hand-picked values", "[capnp]") {
  completion_request req;
  req.request_id = big;
  req.prompt = {256, 72, -5, 0, 2147483647};
  req.max_tokens = -3;
  req.temperature = 0.75f;
  req.seed = UINT64_MAX;
  req.stream = true;
  req.cache_salt = "tenant-\xE6\x97\xA5\xE6\x9C\xAC-\xF0\x9F\x94\x91";
  req.media = {{0, 2, UINT64_MAX}, {2, 3, big}};
  CHECK(round_trip(req) == req);
  CHECK(round_trip(req).media[1].hash == big);

  completion_chunk chunk{big + 2, 7, -1};
  CHECK(round_trip(chunk) == chunk);

  completion_result res;
  res.request_id = big;
  res.token_ids = {1, 2, 3, 257};
  res.finish_reason = "length";
  res.prompt_tokens = 300;
  res.cached_tokens = 256;
  res.resume_at = 192;
  res.from_hbm = 64;
  res.from_cpu = 128;
  res.from_store = -1;
  res.reason = "checkpoint at 192 \xE2\x80\x94 no image at 256";
  res.logits_digest = 0xfedcba9876543211ull;
  res.num_preemptions = 2;
  res.duration_ms = 12.5e-3;
  CHECK(round_trip(res) == res);

  completion_failed failed{big, "prompt is empty \xE2\x9C\x97", "invalid_request_error"};
  CHECK(round_trip(failed) == failed);

  evict_request ev{big, "hbm"};
  CHECK(round_trip(ev) == ev);
  evict_result evr{big + 5, "hbm", -7};
  CHECK(round_trip(evr) == evr);
}

TEST_CASE("step messages round-trip with nested structs", "[capnp]") {
  step_plan plan;
  plan.header = {big, big + 1};
  for (int i = 0; i < 3; ++i) {
    scheduled_request r;
    r.request_id = big + 10 * i;
    r.state_slot = i - 1;
    r.reset_state = i == 0;
    r.first_position = 64 * i;
    r.token_ids = {i, i + 1, -i - 2};
    r.block_table = {7, 3, i};
    r.sample = i == 2;
    r.temperature = 0.25f * i;
    r.seed = UINT64_MAX - i;
    plan.requests.push_back(r);
  }
  plan.clears = {9, 0, -1};
  plan.restores = {{big, 2, 192, {4, 5, 6}}};
  plan.checkpoint_copies = {{big, 2, 256, {7}}, {3, -1, 0, {}}};
  const step_plan back = round_trip(plan);
  CHECK(back == plan);
  CHECK(back.requests[2].seed == UINT64_MAX - 2);
  REQUIRE(back.restores.size() == 1);
  CHECK(back.restores[0].units == std::vector<int32_t>{4, 5, 6});
  REQUIRE(back.checkpoint_copies.size() == 2);
  CHECK(back.checkpoint_copies[1].state_slot == -1);

  step_done done;
  done.header = {1, big};
  done.samples = {{big, 5, 65, 0x8000000000000001ull}, {2, -1, 257, 3}, {3, 0, 0, big}};
  done.device_ms = -0.0625;
  CHECK(round_trip(done) == done);
}

TEST_CASE("pool, connector and store messages round-trip", "[capnp]") {
  pool_step ps;
  ps.header = {3, 4};
  ps.releases = {big, 1, UINT64_MAX};
  ps.commits = {{big, 0, 0xabcdef0123456789ull}, {2, 5, big}};
  ps.evict_hbm = true;
  ps.grows = {{big, {1, big, UINT64_MAX}, 4, 9, true, {{64, big}, {128, UINT64_MAX}}, 3},
              {7, {}, 0, -1, false, {}, 0}};
  ps.images_ready = {UINT64_MAX, big};
  ps.unpins = {{big, 5}, {1, UINT64_MAX}};
  CHECK(round_trip(ps) == ps);

  pool_step_done psd;
  psd.header = {3, 4};
  psd.results = {{big, true, 2, {0, 1, 5}, 4, big, {11, 12}, {{128, UINT64_MAX, {13, 14}}, {192, 1, {}}}, {21, 22}},
                 {8, false, -1, {}, 0, 0, {}, {}, {}}};
  psd.num_evicted = 3;
  psd.num_free = -2;
  psd.num_cached = 100;
  psd.clears = {3, 2, 1};
  psd.num_images_evicted = -5;
  psd.num_images = 6;
  CHECK(round_trip(psd) == psd);

  connector_lookup cl{big, {big, 2, 3}, 513};
  CHECK(round_trip(cl) == cl);
  connector_lookup_done cld{big, 256, -64, "offload \xC3\xBC", {{0, 4, big}}, {128}, "chunk"};
  CHECK(round_trip(cld) == cld);

  store_contains sc{{{big, 1, 0}, {2, big, 1}, {UINT64_MAX, 0, 255}}};
  CHECK(round_trip(sc) == sc);
  store_contains_done scd{-4, {1, 0, 1}, "chunk"};
  CHECK(round_trip(scd) == scd);
  store_stats st{-1, int64_t{1} << 40, INT64_MAX};
  CHECK(round_trip(st) == st);
}

TEST_CASE("transfer messages keep their flags apart", "[capnp]") {
  // The filler sets every bool to true, so a converter that swaps two bools passes it: here each
  // flag of a struct differs from its sibling.
  transfer_result saved{big, {1, big, 1}, true, false};
  transfer_result loaded{2, {big, 3, 0}, false, true};
  CHECK(round_trip(saved) == saved);
  CHECK(round_trip(loaded) == loaded);
  CHECK(round_trip(saved).is_save);
  CHECK(!round_trip(saved).ok);

  connector_step cs;
  cs.header = {5, 6};
  cs.finished = {saved, loaded};
  cs.loads = {{big, {{7, big, 0}, 0, 256, 4, uint64_t{1} << 33}}};
  cs.saves = {{3, {{7, UINT64_MAX, 1}, 256, 256, 2, 64}}};
  CHECK(round_trip(cs) == cs);

  connector_step_done csd;
  csd.header = {5, 6};
  csd.loads = {{big, {7, big, 0}, true, "ok", big, 4096}};
  csd.saves = {{3, {7, 1, 1}, false, "full â no space", 0, 0}};
  csd.stats = {1, 2, 3, 4, 5, 6, 7, 8, 9, -10};
  csd.granularity = "block";
  CHECK(round_trip(csd) == csd);
  CHECK(round_trip(csd).granularity == "block");
  CHECK(round_trip(csd).stats.rejected_total == -10);

  store_step ss;
  ss.header = {1, 2};
  ss.commits = {{7, big, 0}};
  ss.aborts = {{7, 2, 1}};
  ss.unpins = {};
  ss.pins = {{{7, 3, 0}, 0, 64, 1, 8192}};
  ss.reserves = {{{7, 4, 1}, 0, 128, 3, big}};
  CHECK(round_trip(ss) == ss);

  store_step_done ssd;
  ssd.header = {1, 2};
  ssd.pins = {{{7, 3, 0}, true, "ok", 0, 8192}};
  ssd.reserves = {{{7, 4, 1}, false, "no_space", big, 0}};
  ssd.stats.checksum_failures_total = 3;
  ssd.granularity = "chunk";
  CHECK(round_trip(ssd) == ssd);
  CHECK(round_trip(ssd).granularity == "chunk");

  store_contains_done scd{2, {1, 1, 0, 1}, ""};
  CHECK(round_trip(scd).present == std::vector<uint8_t>{1, 1, 0, 1});

  connector_lookup_done cld{big, 320, 0, "offload", {{0, 4, big}, {4, 1, 9}}, {64, 256}, "chunk"};
  CHECK(round_trip(cld) == cld);
  CHECK(round_trip(cld).granularity == "chunk");

  step_plan plan;
  plan.loads = {{big, 0, 4096, 8192, {3, -1, 4}}};
  plan.saves = {{1, 1, 0, 64, {}}};
  CHECK(round_trip(plan) == plan);
  CHECK(round_trip(plan).loads[0].units == std::vector<int32_t>{3, -1, 4});

  store_corrupt corrupt{1};
  CHECK(round_trip(corrupt) == corrupt);
}

TEST_CASE("equality sees every field", "[capnp]") {
  step_plan a = filled<step_plan>();
  step_plan b = a;
  CHECK(a == b);
  b.requests[1].block_table[2] += 1;
  CHECK(a != b);
  completion_result r = filled<completion_result>();
  completion_result s = r;
  s.duration_ms = -s.duration_ms;
  CHECK(r != s);
}

TEST_CASE("decoding garbage throws a clear error", "[capnp]") {
  using bytes = std::vector<uint8_t>;
  auto message_of = [](const bytes& b) -> std::string {
    try {
      decode_message<completion_request>(b);
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "no exception";
  };

  CHECK(message_of({}).find("decode_message<completion_request>: length 0") == 0);
  CHECK(message_of({1, 2, 3}).find("not a positive multiple of 8") != std::string::npos);

  // Segment table claims 200 segments.
  bytes table(16, 0);
  table[0] = 199;
  CHECK(message_of(table).find("malformed Cap'n Proto message") != std::string::npos);

  // Text that is not a message.
  std::string text = "this is not a capnp message, no!";
  CHECK(message_of(bytes(text.begin(), text.end())).find("decode_message<completion_request>") == 0);

  completion_request req = filled<completion_request>();
  bytes good = encode_message(req);
  REQUIRE(decode_message<completion_request>(good) == req);

  bytes truncated(good.begin(), good.end() - 8);
  CHECK(message_of(truncated).find("malformed") != std::string::npos);

  bytes trailing = good;
  trailing.insert(trailing.end(), 8, 0);
  CHECK(message_of(trailing).find("trailing bytes") != std::string::npos);

  // Root pointer aimed far outside the segment.
  bytes bad_pointer = good;
  bad_pointer[8] = 0xfc;
  bad_pointer[9] = 0xff;
  bad_pointer[10] = 0xff;
  bad_pointer[11] = 0x7f;
  CHECK(message_of(bad_pointer).find("malformed") != std::string::npos);

  // Three words claiming a million-element list of empty structs: must not be materialized.
  bytes amplified = {
      0, 0, 0, 0, 3, 0, 0, 0,   // one segment of three words
      0, 0, 0, 0, 0, 0, 1, 0,   // root: struct, 0 data words, 1 pointer
      1, 0, 0, 0, 7, 0, 0, 0,   // keys: inline-composite list of 0 words after its tag
      0, 0, 0x40, 0, 0, 0, 0, 0 // tag: 2^20 elements of 0 data words, 0 pointers
  };
  std::string amp_msg;
  try {
    decode_message<store_contains>(amplified);
  } catch (const std::runtime_error& e) {
    amp_msg = e.what();
  }
  CHECK(amp_msg.find("decode_message<store_contains>: malformed") == 0);
}
