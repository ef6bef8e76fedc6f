#include "kernels/cpu/dtype.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ordo::cpu {

uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40); // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

float fp8_e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, e = (b >> 3) & 0xf, m = b & 7;
  if (e == 0xf && m == 7) return std::nanf("");
  float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return sign ? -mag : mag;
}

namespace {
struct fp8_table {
  float value[127]; // positive codes 0..126 in increasing order
  fp8_table() {
    for (int c = 0; c < 127; ++c) value[c] = fp8_e4m3_to_float(static_cast<uint8_t>(c));
  }
};
const fp8_table& table() {
  static const fp8_table t;
  return t;
}
} // namespace

uint8_t float_to_fp8_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  const float* v = table().value;
  if (a >= v[126]) return sign | 126; // saturate at 448
  int lo = 0, hi = 126;               // largest code with v[code] <= a
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (v[mid] <= a) lo = mid; else hi = mid - 1;
  }
  const float down = a - v[lo], up = v[lo + 1] - a;
  int code = lo;
  if (up < down || (up == down && (lo & 1))) code = lo + 1;
  return sign | static_cast<uint8_t>(code);
}

void store_elems(void* region, elem_dtype dtype, size_t index, const float* src, int32_t n) {
  switch (dtype) {
  case elem_dtype::fp32: std::memcpy(static_cast<float*>(region) + index, src, n * sizeof(float)); return;
  case elem_dtype::bf16: {
    uint16_t* d = static_cast<uint16_t*>(region) + index;
    for (int32_t i = 0; i < n; ++i) d[i] = float_to_bf16(src[i]);
    return;
  }
  case elem_dtype::fp8_e4m3: {
    uint8_t* d = static_cast<uint8_t*>(region) + index;
    for (int32_t i = 0; i < n; ++i) d[i] = float_to_fp8_e4m3(src[i]);
    return;
  }
  case elem_dtype::i32: break;
  }
  kernel_fail("store_elems: unsupported dtype", static_cast<int>(dtype));
}

void load_elems(const void* region, elem_dtype dtype, size_t index, float* dst, int32_t n, float scale) {
  switch (dtype) {
  case elem_dtype::fp32: std::memcpy(dst, static_cast<const float*>(region) + index, n * sizeof(float)); return;
  case elem_dtype::bf16: {
    const uint16_t* s = static_cast<const uint16_t*>(region) + index;
    for (int32_t i = 0; i < n; ++i) dst[i] = bf16_to_float(s[i]);
    return;
  }
  case elem_dtype::fp8_e4m3: {
    const uint8_t* s = static_cast<const uint8_t*>(region) + index;
    for (int32_t i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_float(s[i]) * scale;
    return;
  }
  case elem_dtype::i32: break;
  }
  kernel_fail("load_elems: unsupported dtype", static_cast<int>(dtype));
}

void kernel_fail(const char* what, long long value) {
  std::fprintf(stderr, "ordo cpu kernel: %s (%lld)\n", what, value);
  std::abort();
}

} // namespace ordo::cpu
