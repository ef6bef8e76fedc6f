// Reading config.json values for a family's parser: each refusal names the file, the key, the value
// and what is allowed, as model_load_error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/models/hf_model.hpp"

namespace ordo {

class hf_config_reader {
public:
  // `where` prefixes keys in messages ("text_config." for a nested text config).
  hf_config_reader(const nlohmann::json& obj, std::string path, std::string where = "")
      : obj_(obj), path_(std::move(path)), where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& fault) const {
    throw model_load_error(path_ + ": " + where_ + key + ": " + fault);
  }
  [[noreturn]] void bad_value(const std::string& key, const nlohmann::json& value, const std::string& allowed) const {
    fail(key, "bad value " + value.dump() + " (allowed: " + allowed + ")");
  }

  bool has(const std::string& key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  const nlohmann::json& at(const std::string& key) const { return obj_.at(key); }

  // An integer in [lo, hi]; a missing key takes `fallback` when given, else is refused.
  int32_t integer(const std::string& key, int64_t lo, int64_t hi, const int64_t* fallback = nullptr) const {
    if (!has(key)) {
      if (fallback) return static_cast<int32_t>(*fallback);
      fail(key, "missing (an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] is needed)");
    }
    const auto& v = obj_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      bad_value(key, v, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int32_t>(v.get<int64_t>());
  }
  int32_t integer_or(const std::string& key, int64_t lo, int64_t hi, int64_t fallback) const {
    return integer(key, lo, hi, &fallback);
  }
  // A positive finite number; `fallback` when missing.
  double positive(const std::string& key, double fallback, double hi = 1e300) const {
    if (!has(key)) return fallback;
    const auto& v = obj_.at(key);
    if (!v.is_number() || !(v.get<double>() > 0.0) || !(v.get<double>() <= hi))
      bad_value(key, v, "a number in (0, " + nlohmann::json(hi).dump() + "]");
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const auto& v = obj_.at(key);
    if (!v.is_boolean()) bad_value(key, v, "true or false");
    return v.get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const auto& v = obj_.at(key);
    if (!v.is_string()) bad_value(key, v, "a string");
    return v.get<std::string>();
  }
  // An id, or a list of ids (eos_token_id); empty when missing.
  std::vector<int32_t> ids(const std::string& key, int64_t vocab) const {
    std::vector<int32_t> out;
    if (!has(key)) return out;
    const auto& v = obj_.at(key);
    const auto one = [&](const nlohmann::json& x) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= vocab)
        bad_value(key, v, "token ids in [0, " + std::to_string(vocab) + ")");
      out.push_back(static_cast<int32_t>(x.get<int64_t>()));
    };
    if (v.is_array()) {
      for (const auto& x : v) one(x);
    } else {
      one(v);
    }
    return out;
  }

private:
  const nlohmann::json& obj_;
  std::string path_;
  std::string where_;
};

} // namespace ordo
