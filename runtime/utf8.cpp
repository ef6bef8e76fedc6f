#include "runtime/utf8.hpp"

#include <cstdint>

namespace ordo {

namespace {

constexpr const char* replacement = "\xEF\xBF\xBD";

// Unicode Table 3-7: the allowed range of the second byte after `lead`, and the length.
bool sequence_of(uint8_t lead, int& length, uint8_t& lo, uint8_t& hi) {
  lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF)
    length = 2;
  else if (lead >= 0xE0 && lead <= 0xEF)
    length = 3, lo = lead == 0xE0 ? 0xA0 : 0x80, hi = lead == 0xED ? 0x9F : 0xBF;
  else if (lead >= 0xF0 && lead <= 0xF4)
    length = 4, lo = lead == 0xF0 ? 0x90 : 0x80, hi = lead == 0xF4 ? 0x8F : 0xBF;
  else
    return false;
  return true;
}

} // namespace

size_t append_utf8(std::string_view bytes, bool final, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    int length = 0;
    uint8_t lo = 0, hi = 0;
    if (!sequence_of(lead, length, lo, hi)) {
      out += replacement;
      ++i;
      continue;
    }
    size_t k = 1; // bytes of the sequence that are valid so far
    while (k < static_cast<size_t>(length) && i + k < bytes.size()) {
      const auto b = static_cast<uint8_t>(bytes[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
        break;
      ++k;
    }
    if (k == static_cast<size_t>(length)) {
      out.append(bytes.substr(i, k));
    } else if (i + k == bytes.size() && !final) {
      return i; // may still complete: hold it back
    } else {
      out += replacement; // the maximal subpart; the byte that broke it starts over
    }
    i += k;
  }
  return i;
}

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  append_utf8(bytes, true, out);
  return out;
}

size_t invalid_utf8_at(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    int length = 0;
    uint8_t lo = 0, hi = 0;
    if (!sequence_of(lead, length, lo, hi) || i + size_t(length) > bytes.size())
      return i;
    for (int k = 1; k < length; ++k) {
      const auto c = static_cast<uint8_t>(bytes[i + size_t(k)]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF))
        return i;
    }
    i += size_t(length);
  }
  return std::string_view::npos;
}

} // namespace ordo
