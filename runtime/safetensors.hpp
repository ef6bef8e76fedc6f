// safetensors: a memory-mapped, fully validated reader of one file or of a Hugging Face directory's
// shards, and a writer (tests, `ordo model random`).
//
// A file is a u64 LE header length N, N bytes of a JSON object {name: {dtype, shape, data_offsets: [b, e)},
// "__metadata__": {string: string}}, then the byte buffer the offsets are relative to. Validation, all
// of it at open, before any tensor is read:
//   | fault                                   | message names              |
//   | file shorter than 8 bytes / than 8 + N  | file, N, the size           |
//   | N > 100 MB (a claim, not a size)        | file, N                     |
//   | header not a JSON object, bad entry     | file, tensor, the field     |
//   | duplicate name                          | file, tensor                |
//   | size != shape x dtype (overflow-checked)| file, tensor, both sizes    |
//   | offsets leave a gap, overlap, or do not | file, tensor, the offsets   |
//   |   end at the file's end                 |                             |
//   | shards: index names a tensor its file   | index, file, tensor         |
//   |   lacks, a file holds one the index     |                             |
//   |   does not map to it, a bad file name   |                             |
// Errors are `safetensors_error` whose what() reads "FILE: tensor NAME: FAULT".
// BF16, F16 and F32 convert to fp32 exactly (bf16 is bits << 16; f16 is widened, subnormals included).
// Runs on: whichever thread loads the model (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace ordo {

struct safetensors_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class st_dtype : uint8_t {
  BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64
};
const char* to_string(st_dtype d);
size_t st_dtype_size(st_dtype d);

// The largest header accepted (the reference implementation's bound).
inline constexpr uint64_t safetensors_max_header_bytes = 100'000'000;

struct st_tensor {
  std::string name;
  st_dtype dtype = st_dtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0; // [begin, end) relative to the byte buffer
  uint64_t end = 0;
  int64_t num_elements() const; // validated not to overflow at open
};

// One mapped file (PROT_READ, MAP_PRIVATE), validated at open.
class safetensors_file {
public:
  // Throws safetensors_error naming `path` and the fault.
  static std::shared_ptr<const safetensors_file> open(const std::string& path);
  // Validates bytes already in memory (tests); `path` only names them in errors. Keeps a copy.
  static std::shared_ptr<const safetensors_file> from_bytes(std::string path, std::vector<uint8_t> bytes);
  ~safetensors_file();
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;

  const std::string& path() const { return path_; }
  // In file order (ascending offsets).
  const std::vector<st_tensor>& tensors() const { return tensors_; }
  const st_tensor* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor's raw little-endian bytes (end - begin of them).
  const uint8_t* bytes(const st_tensor& t) const { return data_ + t.begin; }
  // BF16, F16 or F32 as fp32, exactly; any other dtype is refused naming the tensor.
  std::vector<float> to_f32(const st_tensor& t) const;

private:
  safetensors_file() = default;
  void parse(uint64_t file_size);
  std::string path_;
  void* map_ = nullptr;       // the mapping, when opened from a file
  size_t map_size_ = 0;
  std::vector<uint8_t> owned_; // the bytes, when built from memory
  const uint8_t* base_ = nullptr;
  const uint8_t* data_ = nullptr;
  std::vector<st_tensor> tensors_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: `model.safetensors`, or the shards `model.safetensors.index.json` maps.
class safetensors_checkpoint {
public:
  // Throws safetensors_error naming the file and the fault (a missing directory or file included).
  static safetensors_checkpoint open(const std::string& dir);

  struct entry {
    const safetensors_file* file = nullptr;
    const st_tensor* tensor = nullptr;
  };
  // Sorted by name.
  const std::map<std::string, entry>& tensors() const { return tensors_; }
  const entry* find(const std::string& name) const;
  const std::vector<std::shared_ptr<const safetensors_file>>& files() const { return files_; }

private:
  std::vector<std::shared_ptr<const safetensors_file>> files_;
  std::map<std::string, entry> tensors_;
};

// Exact conversions (exposed for tests).
float bf16_to_f32(uint16_t bits);
float f16_to_f32(uint16_t bits);

// One tensor to write: raw little-endian bytes of `dtype`, shape.size() elements' worth.
struct st_write_tensor {
  std::string name;
  st_dtype dtype = st_dtype::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
// The bytes of a safetensors file holding `tensors` in the given order (header padded to 8 bytes).
std::vector<uint8_t> safetensors_bytes(const std::vector<st_write_tensor>& tensors,
                                       const std::map<std::string, std::string>& metadata = {});
// Writes safetensors_bytes(...) to `path`; throws safetensors_error on an I/O fault.
void write_safetensors(const std::string& path, const std::vector<st_write_tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

} // namespace ordo
