#include "runtime/tokenizer.hpp"

namespace ordo {

std::vector<int32_t> byte_tokenizer::encode(const std::string& text) {
  std::vector<int32_t> ids;
  ids.reserve(text.size() + 1);
  ids.push_back(bos_id);
  for (unsigned char c : text)
    ids.push_back(static_cast<int32_t>(c));
  return ids;
}

std::string byte_tokenizer::decode(const std::vector<int32_t>& ids) {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids)
    if (id >= 0 && id < 256)
      text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  return text;
}

std::string byte_tokenizer::decode_one(int32_t id) {
  if (id < 0 || id >= 256)
    return {};
  return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
}

} // namespace ordo
