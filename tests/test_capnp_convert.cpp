#include <catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

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

// Sets every inspected field, recursively, to a value distinct from its default and from every
// other field, so a converter that drops or swaps a field fails the round trip. Fields appended
// to a struct's inspect are covered without editing this test.
class filler {
public:
  using result_type = void;

  template <class... Ts>
  void operator()(Ts&... xs) {
    (fill(xs), ...);
  }

private:
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
      inspect(*this, x);
    }
  }

  int64_t n_ = 0;
};

template <class T>
T filled() {
  T x;
  filler f;
  inspect(f, x);
  return x;
}

} // namespace

TEMPLATE_TEST_CASE("every inspected field survives a round trip", "[capnp]", command_header,
                   completion_request, completion_chunk, completion_result, completion_failed,
                   cancel_request, stop_sequence, evict_request, evict_result, media_span, scheduled_request, step_plan,
                   sampled_token, step_done, state_image_copy, unit_transfer, block_commit,
                   checkpoint_position, reserved_image, block_grow, image_unpin, pool_step,
                   grow_result, pool_step_done, connector_lookup, connector_lookup_done, kv_object,
                   transfer_order, transfer_result, connector_step, transfer_grant,
                   connector_step_done, object_key, store_contains, store_contains_done,
                   store_stats, object_ref, store_grant, store_step, store_step_done,
                   store_corrupt) {
  const TestType x = filled<TestType>();
  REQUIRE(x != TestType{}); // the filler changed something
  const TestType y = round_trip(x);
  CHECK(to_debug_string(y) == to_debug_string(x));
  CHECK(y == x);
  // Defaults round-trip too (schema defaults mirror the C++ ones).
  CHECK(round_trip(TestType{}) == TestType{});
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
  connector_lookup_done cld{big, 256, -64, "offload \xC3\xBC", {{0, 4, big}}, {128}};
  CHECK(round_trip(cld) == cld);

  store_contains sc{{{big, 1, 0}, {2, big, 1}, {UINT64_MAX, 0, 255}}};
  CHECK(round_trip(sc) == sc);
  store_contains_done scd{-4, {1, 0, 1}};
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
  CHECK(round_trip(csd) == csd);
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
  CHECK(round_trip(ssd) == ssd);

  store_contains_done scd{2, {1, 1, 0, 1}};
  CHECK(round_trip(scd).present == std::vector<uint8_t>{1, 1, 0, 1});

  connector_lookup_done cld{big, 320, 0, "offload", {{0, 4, big}, {4, 1, 9}}, {64, 256}};
  CHECK(round_trip(cld) == cld);

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
