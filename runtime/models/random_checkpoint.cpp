#include "runtime/models/random_checkpoint.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "runtime/models/hf_model.hpp"
#include "runtime/safetensors.hpp"

namespace ordo {

namespace {

using json = nlohmann::json;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Round to nearest even; every value written here is finite.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

struct value_range {
  float lo, hi;
};

value_range range_of(const hf_tensor_rule& rule) {
  const std::string& n = rule.hf_name;
  if (ends_with(n, "A_log")) return {-2.0f, 1.0f};
  if (ends_with(n, "dt_bias")) return {-1.0f, 1.0f};
  if (ends_with(n, "linear_attn.norm.weight")) return {0.5f, 1.5f};
  if (rule.hf_shape.size() == 1) return {-0.5f, 0.5f}; // zero-centred: the weight is 1 + w
  if (ends_with(n, "embed_tokens.weight")) return {-std::sqrt(3.0f), std::sqrt(3.0f)};
  const double fan_in = static_cast<double>(rule.hf_shape.back());
  const auto a = static_cast<float>(std::sqrt(3.0 / fan_in)); // variance 1 / fan_in
  return {-a, a};
}

void make_dirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      throw model_load_error(part + ": cannot be created (" + std::strerror(errno) + ")");
  }
}

} // namespace

uint64_t write_random_checkpoint(const random_checkpoint_options& o) {
  std::ifstream in(o.like_config);
  if (!in) throw model_load_error(o.like_config + ": cannot be opened");
  json config;
  try {
    config = json::parse(in);
  } catch (const json::exception& e) {
    throw model_load_error(o.like_config + ": is not valid JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw model_load_error(o.like_config + ": is not a JSON object");
  json& text = config.contains("text_config") && config["text_config"].is_object() ? config["text_config"] : config;
  if (o.num_layers > 0) {
    const json& had = text["num_hidden_layers"];
    if (!had.is_number_integer() || had.get<int64_t>() < o.num_layers)
      throw model_load_error(o.like_config + ": num_hidden_layers " + had.dump() + " has fewer than the " +
                             std::to_string(o.num_layers) + " layers asked for");
    text["num_hidden_layers"] = o.num_layers;
    if (text.contains("layer_types") && text["layer_types"].is_array() &&
        text["layer_types"].size() >= static_cast<size_t>(o.num_layers))
      text["layer_types"].erase(text["layer_types"].begin() + o.num_layers, text["layer_types"].end());
  }
  make_dirs(o.out_dir);
  struct stat st {};
  if (::stat((o.out_dir + "/model.safetensors.index.json").c_str(), &st) == 0)
    throw model_load_error(o.out_dir + ": already holds model.safetensors.index.json; write into an empty directory");
  {
    std::ofstream out(o.out_dir + "/config.json");
    out << config.dump(2) << "\n";
    if (!out) throw model_load_error(o.out_dir + "/config.json: cannot be written");
  }
  const hf_checkpoint ck = read_hf_config(o.out_dir); // the family's parser checks every dim
  const auto table = ck.family->tensor_table(ck.dims);

  // The header: the table's tensors in its order, tiling the buffer.
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}, {"generator", "ordo model random"}, {"seed", std::to_string(o.seed)}};
  std::vector<st_dtype> dtypes;
  uint64_t offset = 0;
  for (const auto& rule : table) {
    const st_dtype dt = ends_with(rule.hf_name, "A_log") ? st_dtype::F32 : st_dtype::BF16;
    uint64_t n = 1;
    for (int64_t d : rule.hf_shape) n *= static_cast<uint64_t>(d);
    const uint64_t bytes = n * st_dtype_size(dt);
    header[rule.hf_name] = {{"dtype", to_string(dt)}, {"shape", rule.hf_shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    dtypes.push_back(dt);
  }
  std::string head = header.dump();
  head.append((8 - head.size() % 8) % 8, ' ');

  const std::string path = o.out_dir + "/model.safetensors";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw safetensors_error(path + ": cannot be written (" + std::strerror(errno) + ")");
  const uint64_t head_size = head.size();
  out.write(reinterpret_cast<const char*>(&head_size), 8);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  constexpr uint64_t chunk = uint64_t{1} << 20;
  std::vector<uint8_t> buf;
  for (size_t t = 0; t < table.size(); ++t) {
    const auto& rule = table[t];
    const value_range r = range_of(rule);
    const uint64_t key = XXH64(rule.hf_name.data(), rule.hf_name.size(), splitmix64(o.seed));
    uint64_t n = 1;
    for (int64_t d : rule.hf_shape) n *= static_cast<uint64_t>(d);
    const size_t size = st_dtype_size(dtypes[t]);
    for (uint64_t begin = 0; begin < n; begin += chunk) {
      const uint64_t count = std::min(chunk, n - begin);
      buf.resize(count * size);
      for (uint64_t i = 0; i < count; ++i) {
        const double u = static_cast<double>(splitmix64(key + begin + i) >> 11) * 0x1.0p-53; // [0, 1)
        const auto v = static_cast<float>(r.lo + (r.hi - r.lo) * u);
        if (dtypes[t] == st_dtype::F32) {
          std::memcpy(buf.data() + 4 * i, &v, 4);
        } else {
          const uint16_t b = to_bf16(v);
          std::memcpy(buf.data() + 2 * i, &b, 2);
        }
      }
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
    }
  }
  out.flush();
  if (!out) throw safetensors_error(path + ": write failed");
  return 8 + head_size + offset;
}

} // namespace ordo
