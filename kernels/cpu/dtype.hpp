// Conversions of stored KV elements: bf16 (round to nearest even) and fp8 e4m3fn (OCP: bias 7,
// max 448, round to nearest even, saturating), plus reading a stored row back as fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/kv_layout.hpp"

namespace ordo::cpu {

uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t b);
uint8_t float_to_fp8_e4m3(float x);
float fp8_e4m3_to_float(uint8_t b);

inline constexpr float fp8_e4m3_max = 448.0f;

// Stores `n` floats at element offset `index` of a region of `dtype` (fp8: already divided by
// its scale).
void store_elems(void* region, elem_dtype dtype, size_t index, const float* src, int32_t n);
// Loads `n` elements at element offset `index` as floats, times `scale` for fp8.
void load_elems(const void* region, elem_dtype dtype, size_t index, float* dst, int32_t n, float scale);

// Aborts with a message: kernels run as stream work and cannot throw to the enqueuer.
[[noreturn]] void kernel_fail(const char* what, long long value);

} // namespace ordo::cpu
