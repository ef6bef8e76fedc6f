// Device twins of the CPU reference's arithmetic (kernels/cpu/dot.hpp, dtype.cpp, paging.hpp), so a
// kernel that mirrors the CPU order per output element is bitwise equal to it. Built with
// -fmad=false (no implicit contraction, like the CPU build's -ffp-contract=off; the matmul fuses
// explicitly with __fmaf_rn, as its CPU twin does with fma). ORDO_HD functions also
// compile as plain C++, which lets the host check them against glibc (tools/gpu_check.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define ORDO_HD __host__ __device__
#define ORDO_GPU_COMPILER 1
#else
#define ORDO_HD
#define ORDO_GPU_COMPILER 0
#endif

namespace ordo::gpu {

ORDO_HD inline uint32_t bits_of(float x) { uint32_t u; __builtin_memcpy(&u, &x, 4); return u; }
ORDO_HD inline float float_of(uint32_t u) { float x; __builtin_memcpy(&x, &u, 4); return x; }
ORDO_HD inline uint64_t bits_of(double x) { uint64_t u; __builtin_memcpy(&u, &x, 8); return u; }
ORDO_HD inline double double_of(uint64_t u) { double x; __builtin_memcpy(&x, &u, 8); return x; }

// glibc's expf (ARM optimized-routines, 2^(k/32) table and a cubic in double): the CPU reference
// calls std::exp(float), i.e. glibc, and a GPU's own expf differs by an ulp here and there.
// tab[i] = bits(2^(i/32)) - (i << 47).
#define ORDO_EXP2F_TABLE                                                                       \
  {0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull, \
   0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull, \
   0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull, \
   0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull, \
   0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull, \
   0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull, \
   0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull, \
   0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull}

#if ORDO_GPU_COMPILER
static __constant__ uint64_t exp2f_table_device[32] = ORDO_EXP2F_TABLE;
#endif
static const uint64_t exp2f_table_host[32] = ORDO_EXP2F_TABLE;

ORDO_HD inline uint64_t exp2f_table(uint32_t i) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return exp2f_table_device[i];
#else
  return exp2f_table_host[i];
#endif
}

ORDO_HD inline float expf_glibc(float x) {
  const uint32_t abstop = (bits_of(x) >> 20) & 0x7ff;
  if (abstop >= 0x42b) { // |x| >= 88 or NaN
    if (bits_of(x) == 0xff800000u) return 0.0f;
    if (abstop >= 0x7f8) return x + x;
    if (x > 0x1.62e42ep6f) return float_of(0x7f800000u);
    if (x < -0x1.9fe368p6f) return 0.0f;
  }
  const double inv_ln2_n = 0x1.71547652b82fep+0 * 32;
  const double shift = 0x1.8p+52;
  const double c0 = 0x1.c6af84b912394p-5 / 32 / 32 / 32;
  const double c1 = 0x1.ebfce50fac4f3p-3 / 32 / 32;
  const double c2 = 0x1.62e42ff0c52d6p-1 / 32;
  double kd = fma(inv_ln2_n, static_cast<double>(x), shift);
  const uint64_t ki = bits_of(kd);
  kd -= shift;
  const double r = fma(inv_ln2_n, static_cast<double>(x), -kd);
  const uint64_t t = exp2f_table(static_cast<uint32_t>(ki % 32)) + (ki << 47);
  const double s = double_of(t);
  // glibc on x86-64 picks its FMA build at run time (any CPU with FMA): fused steps here too.
  const double zz = fma(c0, r, c1);
  const double r2 = r * r;
  double y = fma(c2, r, 1.0);
  y = fma(zz, r2, y);
  y = y * s;
  return static_cast<float>(y);
}

// The CPU's activation expressions, written the same way.
ORDO_HD inline float sigmoid(float x) { return 1.0f / (1.0f + expf_glibc(-x)); }
ORDO_HD inline float silu(float x) { return x / (1.0f + expf_glibc(-x)); }

// kernels/cpu/dot.hpp in one thread: 8 interleaved lanes, fixed tree, tail in order.
// `load_b(i)` yields element i of the second operand (a converted KV element, say).
template <class A, class B>
ORDO_HD inline float dot8_by(A load_a, B load_b, int32_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) lane[j] += load_a(i + j) * load_b(i + j);
  float acc = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) acc += load_a(i) * load_b(i);
  return acc;
}

ORDO_HD inline float dot8(const float* a, const float* b, int32_t n) {
  return dot8_by([a](int32_t i) { return a[i]; }, [b](int32_t i) { return b[i]; }, n);
}

#if ORDO_GPU_COMPILER
} // namespace ordo::gpu
#include "kernels/hip_compat.hpp"
namespace ordo::gpu {

// kernels/cpu/dot.hpp's tree over 8 lanes held by 8 consecutive threads (lane = thread & 7):
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), through shuffles; each of the 8 gets the
// total. Every thread of the warp must call it (the shuffles span the warp).
__device__ inline float lane_tree8(float s) {
  s += ORDO_SHFL_XOR(s, 1);
  s += ORDO_SHFL_XOR(s, 2);
  s += ORDO_SHFL_XOR(s, 4);
  return s;
}

// lane_tree8 of C × 8 sums at once, scattered: thread lane (= thread & 7) returns in out[c] the
// tree of v[c][lane] over the 8 lanes. Each stage keeps half of what is left and sends the partner
// the other half (one shuffle per pair where lane_tree8 spends one per value), so 7·C shuffles
// instead of 24·C; every sum meets the same partner sums at the same stage as in lane_tree8, so
// the results are its bits. v is consumed.
template <int C>
__device__ inline void lane_tree8_scatter(float (&v)[C][8], float (&out)[C]) {
  const int32_t lane = threadIdx.x & 7;
  // After the stage of distance d, v[c][p] holds the partial sum of element p·2d + (lane mod 2d).
#pragma unroll
  for (int d = 1; d < 8; d *= 2) {
    const bool hi = (lane & d) != 0;
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int p = 0; p < 4 / d; ++p) {
        const float keep = hi ? v[c][2 * p + 1] : v[c][2 * p];
        const float send = hi ? v[c][2 * p] : v[c][2 * p + 1];
        v[c][p] = keep + ORDO_SHFL_XOR(send, d);
      }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) out[c] = v[c][0];
}
#endif

// 2^k for k in the normal range, exactly.
ORDO_HD inline float pow2f(int k) { return float_of(static_cast<uint32_t>(127 + k) << 23); }

ORDO_HD inline uint16_t float_to_bf16(float x) {
  uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

ORDO_HD inline float bf16_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

ORDO_HD inline float fp8_e4m3_to_float(uint8_t b) {
  const int sign = b >> 7, e = (b >> 3) & 0xf, m = b & 7;
  if (e == 0xf && m == 7) return float_of(0x7fc00000u);
  const float mag = e == 0 ? static_cast<float>(m) * pow2f(-9) : (1.0f + m / 8.0f) * pow2f(e - 7);
  return sign ? -mag : mag;
}

// kernels/cpu/dtype.cpp's search over the positive codes, decoding instead of a table.
ORDO_HD inline uint8_t float_to_fp8_e4m3(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7f;
  const uint8_t sign = (u >> 31) ? 0x80 : 0;
  const float a = float_of(u & 0x7fffffffu);
  if (a >= fp8_e4m3_to_float(126)) return sign | 126;
  int lo = 0, hi = 126;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (fp8_e4m3_to_float(static_cast<uint8_t>(mid)) <= a) lo = mid; else hi = mid - 1;
  }
  const float down = a - fp8_e4m3_to_float(static_cast<uint8_t>(lo));
  const float up = fp8_e4m3_to_float(static_cast<uint8_t>(lo + 1)) - a;
  int code = lo;
  if (up < down || (up == down && (lo & 1))) code = lo + 1;
  return sign | static_cast<uint8_t>(code);
}

inline constexpr float fp8_e4m3_max = 448.0f;

} // namespace ordo::gpu
