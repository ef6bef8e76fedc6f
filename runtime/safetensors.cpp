#include "runtime/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors are little-endian; so is every host ordo runs on");

namespace ordo {

namespace {

using json = nlohmann::json;

struct dtype_name {
  const char* name;
  st_dtype dtype;
  size_t size;
};
constexpr dtype_name dtype_names[] = {
    {"BOOL", st_dtype::BOOL, 1}, {"U8", st_dtype::U8, 1},           {"I8", st_dtype::I8, 1},
    {"F8_E5M2", st_dtype::F8_E5M2, 1}, {"F8_E4M3", st_dtype::F8_E4M3, 1}, {"I16", st_dtype::I16, 2},
    {"U16", st_dtype::U16, 2},   {"F16", st_dtype::F16, 2},         {"BF16", st_dtype::BF16, 2},
    {"I32", st_dtype::I32, 4},   {"U32", st_dtype::U32, 4},         {"F32", st_dtype::F32, 4},
    {"F64", st_dtype::F64, 8},   {"I64", st_dtype::I64, 8},         {"U64", st_dtype::U64, 8},
};

[[noreturn]] void fail(const std::string& file, const std::string& fault) {
  throw safetensors_error(file + ": " + fault);
}
[[noreturn]] void fail(const std::string& file, const std::string& tensor, const std::string& fault) {
  throw safetensors_error(file + ": tensor " + tensor + ": " + fault);
}

// Parses JSON text refusing a key repeated within one object at any depth (nlohmann would keep the last).
json parse_json_no_duplicates(const char* first, const char* last, const std::string& file) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty()) {
      const std::string k = parsed.get<std::string>();
      if (!keys.back().insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j;
  try {
    j = json::parse(first, last, cb);
  } catch (const json::exception& e) {
    fail(file, std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!duplicate.empty()) fail(file, duplicate, "appears twice in the header");
  return j;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool plain_file_name(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\0') == std::string::npos;
}

std::string read_small_file(const std::string& path, uint64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot be opened (") + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size > max_bytes) fail(path, "is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (!in) fail(path, "could not be read");
  return text;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

} // namespace

const char* to_string(st_dtype d) {
  for (const auto& n : dtype_names)
    if (n.dtype == d) return n.name;
  return "?";
}

size_t st_dtype_size(st_dtype d) {
  for (const auto& n : dtype_names)
    if (n.dtype == d) return n.size;
  return 0;
}

int64_t st_tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float bf16_to_f32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h >> 15) << 31;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  uint32_t u;
  if (exp == 0 && man == 0) {
    u = sign;
  } else if (exp == 0) { // subnormal: man * 2^-24, renormalised (every one is a normal float)
    exp = 127 - 14;
    while (!(man & 0x400)) {
      man <<= 1;
      --exp;
    }
    u = sign | (exp << 23) | ((man & 0x3ff) << 13);
  } else if (exp == 31) { // inf, or NaN with its payload
    u = sign | (0xffu << 23) | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// --- one file ---------------------------------------------------------------------------------

std::shared_ptr<const safetensors_file> safetensors_file::open(const std::string& path) {
  std::shared_ptr<safetensors_file> f(new safetensors_file());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot be opened (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "is not a regular file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    fail(path, "is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) fail(path, std::string("cannot be mapped (") + std::strerror(map_errno) + ")");
  f->map_ = map;
  f->map_size_ = size;
  f->base_ = static_cast<const uint8_t*>(map);
  f->parse(size);
  return f;
}

std::shared_ptr<const safetensors_file> safetensors_file::from_bytes(std::string path, std::vector<uint8_t> bytes) {
  std::shared_ptr<safetensors_file> f(new safetensors_file());
  f->path_ = std::move(path);
  f->owned_ = std::move(bytes);
  if (f->owned_.size() < 8)
    fail(f->path_, "is " + std::to_string(f->owned_.size()) + " bytes, shorter than the 8-byte header length");
  f->base_ = f->owned_.data();
  f->parse(f->owned_.size());
  return f;
}

safetensors_file::~safetensors_file() {
  if (map_) ::munmap(map_, map_size_);
}

void safetensors_file::parse(uint64_t file_size) {
  uint64_t n = 0;
  std::memcpy(&n, base_, 8);
  if (n > safetensors_max_header_bytes)
    fail(path_, "header length " + std::to_string(n) + " is over the " + std::to_string(safetensors_max_header_bytes) +
                    "-byte limit");
  if (n > file_size - 8)
    fail(path_, "header length " + std::to_string(n) + " runs past the end of the " + std::to_string(file_size) +
                    "-byte file (truncated?)");
  const char* text = reinterpret_cast<const char*>(base_ + 8);
  if (n == 0 || text[0] != '{') fail(path_, "header does not start with '{'");
  const json header = parse_json_no_duplicates(text, text + n, path_);
  if (!header.is_object()) fail(path_, "header is not a JSON object");
  data_ = base_ + 8 + n;
  const uint64_t data_size = file_size - 8 - n;

  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(path_, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(path_, "__metadata__ value of " + k + " is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) fail(path_, name, "entry is not an object");
    for (const auto& [k, v] : value.items())
      if (k != "dtype" && k != "shape" && k != "data_offsets") fail(path_, name, "unknown field \"" + k + "\"");
    st_tensor t;
    t.name = name;
    const auto dt = value.find("dtype");
    if (dt == value.end() || !dt->is_string()) fail(path_, name, "no dtype string");
    const std::string dts = dt->get<std::string>();
    const auto known = std::find_if(std::begin(dtype_names), std::end(dtype_names),
                                    [&](const dtype_name& d) { return dts == d.name; });
    if (known == std::end(dtype_names)) fail(path_, name, "unknown dtype \"" + dts + "\"");
    t.dtype = known->dtype;

    const auto sh = value.find("shape");
    if (sh == value.end() || !sh->is_array()) fail(path_, name, "no shape array");
    uint64_t elements = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        fail(path_, name, "shape entry " + d.dump() + " is not a non-negative integer");
      const uint64_t dim = d.get<uint64_t>();
      if (__builtin_mul_overflow(elements, dim, &elements) || elements > static_cast<uint64_t>(INT64_MAX))
        fail(path_, name, "shape " + sh->dump() + " overflows 64 bits");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(known->size), &bytes))
      fail(path_, name, "shape " + shape_text(t.shape) + " of " + dts + " overflows 64 bits in bytes");

    const auto off = value.find("data_offsets");
    if (off == value.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(path_, name, "data_offsets is not a pair of non-negative integers");
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end)
      fail(path_, name, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") end before they begin");
    if (t.end > data_size)
      fail(path_, name, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                            ") run past the " + std::to_string(data_size) + " data bytes the file holds (truncated?)");
    if (t.end - t.begin != bytes)
      fail(path_, name, "holds " + std::to_string(t.end - t.begin) + " bytes but shape " + shape_text(t.shape) + " of " +
                            dts + " needs " + std::to_string(bytes));
    tensors_.push_back(std::move(t));
  }

  // The tensors tile the buffer exactly: sorted by offset, each begins where the last ended, from 0 to its end.
  std::sort(tensors_.begin(), tensors_.end(), [](const st_tensor& a, const st_tensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const st_tensor* previous = nullptr;
  for (const auto& t : tensors_) {
    if (t.begin < expected)
      fail(path_, t.name, "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") overlap tensor " +
                              previous->name + " [" + std::to_string(previous->begin) + ", " + std::to_string(previous->end) + ")");
    if (t.begin > expected)
      fail(path_, t.name, "data_offsets begin at " + std::to_string(t.begin) + ", leaving bytes [" +
                              std::to_string(expected) + ", " + std::to_string(t.begin) + ") that no tensor covers");
    expected = t.end;
    previous = &t;
  }
  if (expected != data_size)
    fail(path_, "the tensors end at data byte " + std::to_string(expected) + " but the file holds " +
                    std::to_string(data_size) + " data bytes");
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_[tensors_[i].name] = i;
}

const st_tensor* safetensors_file::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> safetensors_file::to_f32(const st_tensor& t) const {
  const auto n = static_cast<size_t>(t.num_elements());
  std::vector<float> out(n);
  const uint8_t* p = bytes(t);
  switch (t.dtype) {
  case st_dtype::F32:
    std::memcpy(out.data(), p, n * 4);
    break;
  case st_dtype::BF16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      out[i] = bf16_to_f32(b);
    }
    break;
  case st_dtype::F16:
    for (size_t i = 0; i < n; ++i) {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      out[i] = f16_to_f32(b);
    }
    break;
  default:
    fail(path_, t.name, std::string("dtype ") + to_string(t.dtype) + " is not one of F32, BF16, F16");
  }
  return out;
}

// --- a directory ------------------------------------------------------------------------------

safetensors_checkpoint safetensors_checkpoint::open(const std::string& dir) {
  safetensors_checkpoint ck;
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  const bool has_single = file_exists(single), has_index = file_exists(index);
  if (has_single && has_index)
    fail(dir, "holds both model.safetensors and model.safetensors.index.json; which one is the checkpoint is ambiguous");
  if (!has_single && !has_index) fail(dir, "holds neither model.safetensors nor model.safetensors.index.json");
  if (has_single) {
    ck.files_.push_back(safetensors_file::open(single));
    for (const auto& t : ck.files_[0]->tensors()) ck.tensors_[t.name] = entry{ck.files_[0].get(), &t};
    return ck;
  }

  const std::string text = read_small_file(index, safetensors_max_header_bytes);
  const json j = parse_json_no_duplicates(text.data(), text.data() + text.size(), index);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail(index, "has no \"weight_map\" object");
  std::map<std::string, std::string> weight_map; // tensor -> file
  std::map<std::string, size_t> file_slot;       // file -> index in files_
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) fail(index, name, "maps to " + file.dump() + ", not a file name");
    const std::string f = file.get<std::string>();
    if (!plain_file_name(f)) fail(index, name, "maps to \"" + f + "\", not a file name inside the directory");
    weight_map[name] = f;
    if (!file_slot.count(f)) {
      file_slot[f] = ck.files_.size();
      ck.files_.push_back(safetensors_file::open(dir + "/" + f));
    }
  }
  if (weight_map.empty()) fail(index, "maps no tensor");
  for (const auto& [f, slot] : file_slot) {
    const auto& file = ck.files_[slot];
    for (const auto& t : file->tensors()) {
      const auto it = weight_map.find(t.name);
      if (it == weight_map.end()) fail(file->path(), t.name, "is not in " + index);
      if (it->second != f) fail(file->path(), t.name, "is mapped to " + it->second + " by " + index);
      ck.tensors_[t.name] = entry{file.get(), &t};
    }
  }
  for (const auto& [name, f] : weight_map)
    if (!ck.tensors_.count(name)) fail(index, name, "is mapped to " + f + ", which does not hold it");
  return ck;
}

const safetensors_checkpoint::entry* safetensors_checkpoint::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

// --- writing ----------------------------------------------------------------------------------

std::vector<uint8_t> safetensors_bytes(const std::vector<st_write_tensor>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", to_string(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + text.size());
  const uint64_t n = text.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, text.data(), text.size());
  for (const auto& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<st_write_tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto bytes = safetensors_bytes(tensors, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, std::string("cannot be written (") + std::strerror(errno) + ")");
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail(path, "write failed");
}

} // namespace ordo
