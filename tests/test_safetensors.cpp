#include <catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/scratch_dir.hpp"
#include "runtime/safetensors.hpp"

using namespace ordo;

namespace {

// A file built byte by byte: u64 LE header length, the header text as given, then `data_bytes` bytes.
std::vector<uint8_t> raw_file(const std::string& header, size_t data_bytes, uint64_t claimed_length = UINT64_MAX) {
  const uint64_t n = claimed_length == UINT64_MAX ? header.size() : claimed_length;
  std::vector<uint8_t> out(8 + header.size() + data_bytes);
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (size_t i = 0; i < data_bytes; ++i) out[8 + header.size() + i] = static_cast<uint8_t>(i);
  return out;
}

// The message from_bytes refuses `bytes` with, or "" when it accepts them.
std::string refusal(const std::vector<uint8_t>& bytes, const std::string& name = "bad.safetensors") {
  try {
    safetensors_file::from_bytes(name, bytes);
  } catch (const safetensors_error& e) {
    return e.what();
  }
  return "";
}

std::string temp_dir() { return test::scratch_dir("ordo_st"); }

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::string open_refusal(const std::string& dir) {
  try {
    safetensors_checkpoint::open(dir);
  } catch (const safetensors_error& e) {
    return e.what();
  }
  return "";
}

using Catch::Matchers::Contains;

} // namespace

TEST_CASE("a written file reads back: names, dtypes, shapes, values and metadata", "[safetensors]") {
  const std::string dir = temp_dir();
  const std::vector<float> w = {1.5f, -2.25f, 3.0e-8f, 65504.0f, -0.0f, 7.0f};
  std::vector<uint8_t> bf16 = {0x80, 0x3f, 0x00, 0xc0}; // 1.0, -2.0
  std::vector<uint8_t> f16 = {0x00, 0x3c, 0x01, 0x00};  // 1.0, 2^-24 (the smallest subnormal)
  write_safetensors(dir + "/m.safetensors",
                    {{"w", st_dtype::F32, {2, 3}, f32_bytes(w)},
                     {"b", st_dtype::BF16, {2}, bf16},
                     {"h", st_dtype::F16, {2, 1}, f16},
                     {"empty", st_dtype::F32, {0, 4}, {}}},
                    {{"format", "pt"}});
  const auto f = safetensors_file::open(dir + "/m.safetensors");
  REQUIRE(f->tensors().size() == 4);
  CHECK(f->metadata().at("format") == "pt");
  const st_tensor* t = f->find("w");
  REQUIRE(t != nullptr);
  CHECK(t->shape == std::vector<int64_t>{2, 3});
  CHECK(f->to_f32(*t) == w);
  CHECK(f->to_f32(*f->find("b")) == std::vector<float>{1.0f, -2.0f});
  CHECK(f->to_f32(*f->find("h")) == std::vector<float>{1.0f, std::ldexp(1.0f, -24)});
  CHECK(f->find("empty")->num_elements() == 0);
  CHECK(f->find("nope") == nullptr);
}

TEST_CASE("F16 and BF16 convert exactly, every one of the 65536 values", "[safetensors]") {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const int sign = (h >> 15) ? -1 : 1;
    const int exp = (h >> 10) & 0x1f;
    const int man = h & 0x3ff;
    const float got = f16_to_f32(h);
    if (exp == 31) {
      CHECK((man == 0 ? std::isinf(got) : std::isnan(got)));
      CHECK(std::signbit(got) == (sign < 0));
      continue;
    }
    const double want = exp == 0 ? sign * std::ldexp(static_cast<double>(man), -24)
                                 : sign * std::ldexp(1.0 + man / 1024.0, exp - 15);
    if (static_cast<double>(got) != want || std::signbit(got) != (sign < 0)) {
      FAIL("f16 bits " << bits << " gave " << got << ", want " << want);
    }
    // bf16: the bits are the top half of the float's.
    const float b = bf16_to_f32(h);
    uint32_t u;
    std::memcpy(&u, &b, 4);
    if (u != bits << 16) FAIL("bf16 bits " << bits);
  }
}

TEST_CASE("malformed files are refused naming the file, the tensor and the fault", "[safetensors]") {
  const std::string ok_header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  REQUIRE(refusal(raw_file(ok_header, 16)).empty());

  SECTION("shorter than the header length field") {
    CHECK_THAT(refusal({1, 2, 3, 4}), Contains("bad.safetensors: is 4 bytes, shorter than the 8-byte header length"));
  }
  SECTION("a huge header claim is refused before anything is read") {
    CHECK_THAT(refusal(raw_file(ok_header, 16, uint64_t{1} << 40)),
               Contains("bad.safetensors: header length 1099511627776 is over the 100000000-byte limit"));
  }
  SECTION("a header length past the end of the file") {
    CHECK_THAT(refusal(raw_file(ok_header, 0, ok_header.size() + 100)),
               Contains("runs past the end of the") && Contains("(truncated?)"));
  }
  SECTION("truncated data") {
    auto bytes = raw_file(ok_header, 16);
    bytes.resize(bytes.size() - 3);
    CHECK_THAT(refusal(bytes), Contains("bad.safetensors: tensor b: data_offsets [8, 16) run past the 13 data bytes the file holds (truncated?)"));
  }
  SECTION("a header that is not a JSON object") {
    CHECK_THAT(refusal(raw_file("[1,2]", 0)), Contains("header does not start with '{'"));
    CHECK_THAT(refusal(raw_file("{\"a\":", 0)), Contains("header is not valid JSON"));
  }
  SECTION("overlapping offsets") {
    const std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    CHECK_THAT(refusal(raw_file(h, 12)), Contains("bad.safetensors: tensor b: data_offsets [4, 12) overlap tensor a [0, 8)"));
  }
  SECTION("a gap between tensors") {
    const std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
    CHECK_THAT(refusal(raw_file(h, 20)), Contains("tensor b: data_offsets begin at 12, leaving bytes [8, 12) that no tensor covers"));
  }
  SECTION("bytes after the last tensor") {
    CHECK_THAT(refusal(raw_file(ok_header, 20)), Contains("the tensors end at data byte 16 but the file holds 20 data bytes"));
  }
  SECTION("a size that is not shape x dtype") {
    const std::string h = R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
    CHECK_THAT(refusal(raw_file(h, 8)), Contains("bad.safetensors: tensor a: holds 8 bytes but shape [3] of F32 needs 12"));
    const std::string bf = R"({"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})";
    CHECK_THAT(refusal(raw_file(bf, 16)), Contains("tensor a: holds 16 bytes but shape [2, 2] of BF16 needs 8"));
  }
  SECTION("a shape whose size overflows") {
    const std::string h = R"({"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})";
    CHECK_THAT(refusal(raw_file(h, 8)), Contains("tensor a: shape [4611686018427387904,8] overflows 64 bits"));
    const std::string b = R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})";
    CHECK_THAT(refusal(raw_file(b, 8)), Contains("tensor a: shape [4611686018427387904] of F64 overflows 64 bits in bytes"));
  }
  SECTION("a duplicate name") {
    const std::string h =
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    CHECK_THAT(refusal(raw_file(h, 16)), Contains("bad.safetensors: tensor a: appears twice in the header"));
  }
  SECTION("bad entries") {
    CHECK_THAT(refusal(raw_file(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", 8)), Contains("tensor a: unknown dtype \"F31\""));
    CHECK_THAT(refusal(raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8)),
               Contains("tensor a: shape entry -2 is not a non-negative integer"));
    CHECK_THAT(refusal(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)), Contains("end before they begin"));
    CHECK_THAT(refusal(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8)),
               Contains("tensor a: data_offsets is not a pair"));
    CHECK_THAT(refusal(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8)), Contains("unknown field \"x\""));
    CHECK_THAT(refusal(raw_file(R"({"__metadata__":{"k":1}})", 0)), Contains("__metadata__ value of k is not a string"));
  }
  SECTION("a dtype that does not convert to fp32") {
    const auto f = safetensors_file::from_bytes("i.safetensors", raw_file(R"({"n":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8));
    CHECK_THROWS_WITH(f->to_f32(*f->find("n")), Contains("i.safetensors: tensor n: dtype I32 is not one of F32, BF16, F16"));
  }
}

TEST_CASE("a truncated file on disk is refused by open(), naming it", "[safetensors]") {
  const std::string dir = temp_dir();
  auto bytes = safetensors_bytes({{"w", st_dtype::BF16, {4, 4}, std::vector<uint8_t>(32, 0)}});
  bytes.resize(bytes.size() - 1);
  write_bytes(dir + "/model.safetensors", bytes);
  CHECK_THAT(open_refusal(dir), Contains(dir + "/model.safetensors: tensor w: data_offsets [0, 32) run past the 31 data bytes"));
  write_bytes(dir + "/model.safetensors", {});
  CHECK_THAT(open_refusal(dir), Contains("model.safetensors: is 0 bytes, shorter than the 8-byte header length"));
}

TEST_CASE("a sharded checkpoint is consistent with its index", "[safetensors]") {
  const std::string dir = temp_dir();
  write_safetensors(dir + "/s1.safetensors", {{"a", st_dtype::F32, {1}, f32_bytes({1.0f})}});
  write_safetensors(dir + "/s2.safetensors", {{"b", st_dtype::F32, {1}, f32_bytes({2.0f})},
                                              {"c", st_dtype::F32, {1}, f32_bytes({3.0f})}});
  const std::string index = dir + "/model.safetensors.index.json";
  write_text(index, R"({"metadata":{"total_size":12},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors"}})");
  {
    const auto ck = safetensors_checkpoint::open(dir);
    CHECK(ck.files().size() == 2);
    REQUIRE(ck.tensors().size() == 3);
    const auto* c = ck.find("c");
    REQUIRE(c != nullptr);
    CHECK(c->file->to_f32(*c->tensor) == std::vector<float>{3.0f});
  }
  SECTION("the index names a tensor its file lacks") {
    write_text(index, R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors","c":"s2.safetensors","d":"s1.safetensors"}})");
    CHECK_THAT(open_refusal(dir), Contains("model.safetensors.index.json: tensor d: is mapped to s1.safetensors, which does not hold it"));
  }
  SECTION("a shard holds a tensor the index does not name") {
    write_text(index, R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
    CHECK_THAT(open_refusal(dir), Contains("s2.safetensors: tensor c: is not in"));
  }
  SECTION("the index maps a tensor to the other shard") {
    write_text(index, R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors","c":"s2.safetensors"}})");
    CHECK_THAT(open_refusal(dir), Contains("tensor b: is mapped to s1.safetensors by"));
  }
  SECTION("a shard outside the directory") {
    write_text(index, R"({"weight_map":{"a":"../s1.safetensors"}})");
    CHECK_THAT(open_refusal(dir), Contains("tensor a: maps to \"../s1.safetensors\", not a file name inside the directory"));
  }
  SECTION("a missing shard") {
    write_text(index, R"({"weight_map":{"a":"s3.safetensors"}})");
    CHECK_THAT(open_refusal(dir), Contains("s3.safetensors: cannot be opened"));
  }
  SECTION("a duplicate key in the index") {
    write_text(index, R"({"weight_map":{"a":"s1.safetensors","a":"s2.safetensors"}})");
    CHECK_THAT(open_refusal(dir), Contains("model.safetensors.index.json: tensor a: appears twice"));
  }
  SECTION("both a single file and an index") {
    write_safetensors(dir + "/model.safetensors", {{"a", st_dtype::F32, {1}, f32_bytes({1.0f})}});
    CHECK_THAT(open_refusal(dir), Contains("holds both model.safetensors and model.safetensors.index.json"));
  }
  SECTION("neither") {
    CHECK_THAT(open_refusal(dir + "/nothing_here"), Contains("holds neither model.safetensors nor"));
  }
}

TEST_CASE("the committed fixtures read as the Python safetensors library listed them", "[safetensors]") {
  for (const char* name : {"qwen3_5_text", "qwen3_5_vl_sharded", "qwen3_next_dense"}) {
    const std::string dir = std::string("tests/data/hf/") + name;
    std::ifstream in(dir + "/ordo_expected.json");
    REQUIRE(in.good());
    const auto expected = nlohmann::json::parse(in)["tensors"];
    const auto ck = safetensors_checkpoint::open(dir);
    CHECK(ck.tensors().size() == expected.size());
    for (const auto& [tname, e] : ck.tensors()) {
      INFO(name << " " << tname);
      REQUIRE(expected.contains(tname));
      const auto& want = expected[tname]; // [file, dtype, shape]
      CHECK(e.file->path() == dir + "/" + want[0].get<std::string>());
      CHECK(std::string(to_string(e.tensor->dtype)) == want[1].get<std::string>());
      CHECK(e.tensor->shape == want[2].get<std::vector<int64_t>>());
    }
  }
  const auto ck = safetensors_checkpoint::open("tests/data/hf/qwen3_5_vl_sharded");
  CHECK(ck.files().size() == 5);
  const auto* a_log = ck.find("model.language_model.layers.0.linear_attn.A_log");
  REQUIRE(a_log != nullptr);
  CHECK(a_log->tensor->dtype == st_dtype::F32);
}
