// CPU reference kernels against naive implementations on small random inputs, plus the
// properties the model's determinism rests on (batch invariance, state continuation, tie rules).
#include <catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/conv.hpp"
#include "kernels/cpu/dtype.hpp"
#include "kernels/cpu/gdn.hpp"
#include "kernels/cpu/hash.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/ple.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/sampling.hpp"
#include "kernels/cpu/sparse_attention.hpp"

using namespace ordo;

namespace {

std::vector<float> random_floats(uint64_t key, size_t n, float scale = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = cpu::uniform_pm1(cpu::hash3(key, i, 17)) * scale;
  return v;
}

// Host-side batch: the CPU kernels take host pointers as device memory.
struct host_batch {
  std::vector<int32_t> token_ids, positions, slot_mapping, req_token_start{0}, req_block_table_start{0}, block_tables,
      req_state_slot, req_reset_state, sample_rows;
  std::vector<float> temps;
  std::vector<uint64_t> seeds;
  int32_t block_size = 4;

  void add(int32_t first_position, int32_t count, const std::vector<int32_t>& blocks, int32_t slot = 0,
           const std::vector<int32_t>& tokens = {}) {
    for (int32_t i = 0; i < count; ++i) {
      const int32_t p = first_position + i;
      positions.push_back(p);
      token_ids.push_back(tokens.empty() ? p % 256 : tokens[i]);
      slot_mapping.push_back(blocks[p / block_size] * block_size + p % block_size);
    }
    req_token_start.push_back(static_cast<int32_t>(positions.size()));
    block_tables.insert(block_tables.end(), blocks.begin(), blocks.end());
    req_block_table_start.push_back(static_cast<int32_t>(block_tables.size()));
    req_state_slot.push_back(slot);
    req_reset_state.push_back(0);
  }
  device_batch view() const {
    device_batch b;
    b.num_tokens = static_cast<int32_t>(positions.size());
    b.num_reqs = static_cast<int32_t>(req_state_slot.size());
    b.num_samples = static_cast<int32_t>(sample_rows.size());
    b.token_ids = token_ids.data();
    b.positions = positions.data();
    b.slot_mapping = slot_mapping.data();
    b.req_token_start = req_token_start.data();
    b.req_block_table_start = req_block_table_start.data();
    b.block_tables = block_tables.data();
    b.req_state_slot = req_state_slot.data();
    b.req_reset_state = req_reset_state.data();
    b.sample_rows = sample_rows.data();
    b.sample_temperature = temps.data();
    b.sample_seed = seeds.data();
    return b;
  }
};

} // namespace

TEST_CASE("matmul matches a naive product and is batch invariant", "[kernels]") {
  const int32_t rows = 5, in = 37, out = 11;
  const auto x = random_floats(1, rows * in), w = random_floats(2, out * in);
  std::vector<float> y(rows * out, 0.0f);
  cpu::matmul({x.data(), in, w.data(), y.data(), out, rows, in, out, false});
  for (int32_t r = 0; r < rows; ++r)
    for (int32_t o = 0; o < out; ++o) {
      double ref = 0;
      for (int32_t k = 0; k < in; ++k) ref += double(x[r * in + k]) * w[o * in + k];
      CHECK(y[r * out + o] == Approx(ref).margin(1e-5));
    }
  std::vector<float> one(out);
  cpu::matmul({x.data() + 3 * in, in, w.data(), one.data(), out, 1, in, out, false});
  CHECK(std::memcmp(one.data(), y.data() + 3 * out, out * sizeof(float)) == 0);
  std::vector<float> acc(out, 1.0f);
  cpu::matmul({x.data() + 3 * in, in, w.data(), acc.data(), out, 1, in, out, true});
  for (int32_t o = 0; o < out; ++o) CHECK(acc[o] == 1.0f + one[o]);
}

// The matmul's lanes are fused multiply-adds (one rounding), as the GPU's fmaf: lane 0 holds
// -(1 + 2^-11) after k = 0, then adds (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 at k = 8. Fused, the 2^-24
// survives; a separate multiply rounds it away first and the lane ends at 0. The tail (k >= 8·⌊in/8⌋)
// is fused too.
TEST_CASE("matmul lanes and tail are fused multiply-adds", "[kernels]") {
  const float e11 = std::ldexp(1.0f, -11), e12 = std::ldexp(1.0f, -12), e24 = std::ldexp(1.0f, -24);
  for (int32_t in : {16, 17}) {
    std::vector<float> x(in, 0.0f), w(in, 0.0f);
    x[0] = 1.0f + e11, w[0] = -1.0f;
    const int32_t k = in == 16 ? 8 : 16; // a lane step, then the tail
    x[k] = w[k] = 1.0f + e12;
    float y = -1.0f;
    cpu::matmul({x.data(), in, w.data(), &y, 1, 1, in, 1, false});
    INFO("in = " << in);
    CHECK(y == e24);
  }
}

TEST_CASE("bf16 and fp8 e4m3 conversions round to nearest even", "[kernels]") {
  CHECK(cpu::float_to_bf16(1.0f) == 0x3f80);
  CHECK(cpu::float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);     // tie → even
  CHECK(cpu::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82); // tie → even
  CHECK(cpu::float_to_bf16(1.0f + std::ldexp(1.0f, -7) + std::ldexp(1.0f, -12)) == 0x3f81);
  CHECK(cpu::bf16_to_float(0xc040) == -3.0f);
  for (int c = 0; c < 127; ++c) {
    const float v = cpu::fp8_e4m3_to_float(static_cast<uint8_t>(c));
    CHECK(cpu::float_to_fp8_e4m3(v) == c);
    CHECK(cpu::float_to_fp8_e4m3(-v) == (c == 0 ? 0x80 : (0x80 | c)));
  }
  CHECK(cpu::fp8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(cpu::float_to_fp8_e4m3(1000.0f) == 0x7e); // saturates
  CHECK(cpu::float_to_fp8_e4m3(1.0625f) == 0x38); // between 1.0 (0x38) and 1.125: even
  CHECK(cpu::float_to_fp8_e4m3(1.1875f) == 0x3a); // between 1.125 (0x39) and 1.25: even
  CHECK(cpu::fp8_e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
}

TEST_CASE("rope rotates pairs by the table's angle", "[kernels]") {
  const int32_t hd = 4, maxp = 3;
  std::vector<float> table(maxp * 2 * 2);
  for (int32_t p = 0; p < maxp; ++p)
    for (int32_t i = 0; i < 2; ++i) {
      table[(p * 2 + i) * 2] = std::cos(0.5f * p * (i + 1));
      table[(p * 2 + i) * 2 + 1] = std::sin(0.5f * p * (i + 1));
    }
  std::vector<float> x{1, 2, 3, 4, 1, 2, 3, 4};
  std::vector<int32_t> pos{0, 2};
  cpu::rope({x.data(), hd, pos.data(), table.data(), 2, 1, hd, maxp});
  CHECK(x[0] == 1.0f);
  CHECK(x[2] == 3.0f); // position 0: identity
  const float c = std::cos(1.0f), s = std::sin(1.0f);
  CHECK(x[4] == Approx(1 * c - 3 * s));
  CHECK(x[6] == Approx(1 * s + 3 * c));
}

// Paged attention vs a dense softmax over K/V gathered by position, with GQA, a shuffled block
// table and two requests.
TEST_CASE("paged attention equals dense softmax attention over gathered K/V", "[kernels]") {
  const elem_dtype dtype = GENERATE(elem_dtype::fp32, elem_dtype::bf16, elem_dtype::fp8_e4m3);
  const int32_t hq = 4, hkv = 2, hd = 8, bs = 4, num_blocks = 16;
  host_batch hb;
  hb.block_size = bs;
  hb.add(0, 10, {7, 2, 11});
  hb.add(3, 6, {5, 0, 9});
  const int32_t n = static_cast<int32_t>(hb.positions.size());
  // request 1 has positions 0..2 from an "earlier step": store them first.
  host_batch early;
  early.block_size = bs;
  early.add(0, 3, {5, 0, 9});
  const int32_t kvd = hkv * hd;
  std::vector<unsigned char> kreg(num_blocks * bs * kvd * 4), vreg(kreg.size());
  std::vector<float> ksc(num_blocks * bs * hkv), vsc(ksc.size());
  const auto keys = random_floats(10, (n + 3) * kvd), vals = random_floats(11, (n + 3) * kvd);
  const auto q = random_floats(12, n * hq * hd, 2.0f);
  const auto store = [&](const host_batch& b, const float* k, const float* v, int32_t rows) {
    cpu::kv_store({k, kvd, b.slot_mapping.data(), kreg.data(), ksc.data(), dtype, rows, hkv, hd});
    cpu::kv_store({v, kvd, b.slot_mapping.data(), vreg.data(), vsc.data(), dtype, rows, hkv, hd});
  };
  store(early, keys.data() + n * kvd, vals.data() + n * kvd, 3);
  store(hb, keys.data(), vals.data(), n);
  std::vector<float> out(n * hq * hd);
  const bool fp8 = dtype == elem_dtype::fp8_e4m3;
  cpu::paged_attention({hb.view(), q.data(), hq * hd, kreg.data(), vreg.data(), fp8 ? ksc.data() : nullptr,
                        fp8 ? vsc.data() : nullptr, dtype, out.data(), hq * hd, hq, hkv, hd, bs});
  // the rounded K/V a reader should see, per (request, position)
  const auto rounded = [&](float x, float scale) {
    if (dtype == elem_dtype::bf16) return cpu::bf16_to_float(cpu::float_to_bf16(x));
    if (fp8) return cpu::fp8_e4m3_to_float(cpu::float_to_fp8_e4m3(x / scale)) * scale;
    return x;
  };
  const auto source_row = [&](int32_t req, int32_t p) { return req == 0 ? p : (p < 3 ? n + p : 10 + p - 3); };
  for (int32_t row = 0; row < n; ++row) {
    const int32_t req = row < 10 ? 0 : 1, p = hb.positions[row];
    for (int32_t h = 0; h < hq; ++h) {
      const int32_t kvh = h / 2;
      std::vector<double> sc;
      for (int32_t j = 0; j <= p; ++j) {
        const float* kr = keys.data() + source_row(req, j) * kvd + kvh * hd;
        float amax = 0;
        for (int32_t i = 0; i < hd; ++i) amax = std::max(amax, std::fabs(kr[i]));
        double s = 0;
        for (int32_t i = 0; i < hd; ++i) s += double(q[row * hq * hd + h * hd + i]) * rounded(kr[i], amax / 448.0f);
        sc.push_back(s / std::sqrt(double(hd)));
      }
      const double m = *std::max_element(sc.begin(), sc.end());
      double l = 0;
      for (double& s : sc) l += (s = std::exp(s - m));
      for (int32_t i = 0; i < hd; ++i) {
        double o = 0;
        for (int32_t j = 0; j <= p; ++j) {
          const float* vr = vals.data() + source_row(req, j) * kvd + kvh * hd;
          float amax = 0;
          for (int32_t t = 0; t < hd; ++t) amax = std::max(amax, std::fabs(vr[t]));
          o += sc[j] / l * rounded(vr[i], amax / 448.0f);
        }
        CHECK(out[row * hq * hd + h * hd + i] == Approx(o).margin(1e-5));
      }
    }
  }
}

TEST_CASE("attention over several chunks folds to softmax and a decode row equals its prefill row", "[kernels]") {
  // 3 chunks of attention_chunk and a partial one; scores spread wide so the chunk maxima differ.
  const int32_t hq = 2, hkv = 1, hd = 8, bs = 4, len = 3 * attention_chunk + 11, kvd = hkv * hd;
  std::vector<int32_t> blocks(len / bs + 1);
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(blocks.size() - 1 - i);
  host_batch prefill, decode;
  prefill.block_size = decode.block_size = bs;
  prefill.add(0, len, blocks);
  decode.add(len - 1, 1, blocks);
  std::vector<unsigned char> kreg(blocks.size() * bs * kvd * 4), vreg(kreg.size());
  const auto keys = random_floats(20, len * kvd, 3.0f), vals = random_floats(21, len * kvd);
  const auto q = random_floats(22, len * hq * hd, 3.0f);
  cpu::kv_store({keys.data(), kvd, prefill.slot_mapping.data(), kreg.data(), nullptr, elem_dtype::fp32, len, hkv, hd});
  cpu::kv_store({vals.data(), kvd, prefill.slot_mapping.data(), vreg.data(), nullptr, elem_dtype::fp32, len, hkv, hd});
  std::vector<float> all(len * hq * hd), last(hq * hd);
  cpu::paged_attention({prefill.view(), q.data(), hq * hd, kreg.data(), vreg.data(), nullptr, nullptr,
                        elem_dtype::fp32, all.data(), hq * hd, hq, hkv, hd, bs});
  cpu::paged_attention({decode.view(), q.data() + (len - 1) * hq * hd, hq * hd, kreg.data(), vreg.data(), nullptr,
                        nullptr, elem_dtype::fp32, last.data(), hq * hd, hq, hkv, hd, bs});
  for (int32_t i = 0; i < hq * hd; ++i) CHECK(last[i] == all[(len - 1) * hq * hd + i]); // bitwise
  for (int32_t h = 0; h < hq; ++h) {
    std::vector<double> sc(len);
    for (int32_t j = 0; j < len; ++j) {
      double d = 0;
      for (int32_t i = 0; i < hd; ++i) d += double(q[(len - 1) * hq * hd + h * hd + i]) * keys[j * kvd + i];
      sc[j] = d / std::sqrt(double(hd));
    }
    const double m = *std::max_element(sc.begin(), sc.end());
    double l = 0;
    for (double& x : sc) l += (x = std::exp(x - m));
    for (int32_t i = 0; i < hd; ++i) {
      double o = 0;
      for (int32_t j = 0; j < len; ++j) o += sc[j] / l * vals[j * kvd + i];
      CHECK(last[h * hd + i] == Approx(o).margin(1e-5));
    }
  }
}

TEST_CASE("sparse selection: top-k groups before the window, ties to the earlier group", "[kernels]") {
  // position 40, window 16 → window [25, 40]; groups of 4 entirely before it: 0..5
  const std::vector<float> scores{1.0f, 3.0f, 2.0f, 3.0f, 3.0f, 0.5f, 99.0f};
  // three groups tie at 3.0 for two places: the earlier two (1 and 3) win; group 6 is not eligible
  const std::vector<int32_t> pos = cpu::sparse_positions(40, scores.data(), 16, 2, 4);
  std::vector<int32_t> expect{4, 5, 6, 7, 12, 13, 14, 15};
  for (int32_t t = 25; t <= 40; ++t) expect.push_back(t);
  CHECK(pos == expect);
  // early positions: everything is in the window, no group is eligible
  const std::vector<int32_t> early = cpu::sparse_positions(10, scores.data(), 16, 3, 4);
  CHECK(early.size() == 11);
  CHECK(early.front() == 0);
  // fewer eligible groups than k
  const std::vector<int32_t> few = cpu::sparse_positions(23, scores.data(), 16, 3, 4); // window [8, 23]: groups 0, 1
  CHECK(few == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
}

TEST_CASE("index compression and sparse attention equal a naive selection + softmax", "[kernels]") {
  const int32_t hq = 2, hkv = 1, hd = 8, bs = 8, idim = 4, window = 8, top_k = 2, group = 4, num_blocks = 8;
  host_batch hb;
  hb.block_size = bs;
  hb.add(0, 37, {3, 6, 1, 0, 7});
  const int32_t n = 37;
  const auto keys = random_floats(20, n * hkv * hd), vals = random_floats(21, n * hkv * hd);
  const auto q = random_floats(22, n * hq * hd, 2.0f), ik = random_floats(23, n * idim), iq = random_floats(24, n * idim);
  std::vector<float> kreg(num_blocks * bs * hd), vreg(kreg.size()), raw(num_blocks * bs * idim),
      comp(num_blocks * bs / group * idim, -1.0f);
  const device_batch b = hb.view();
  cpu::kv_store({keys.data(), hd, b.slot_mapping, kreg.data(), nullptr, elem_dtype::fp32, n, 1, hd});
  cpu::kv_store({vals.data(), hd, b.slot_mapping, vreg.data(), nullptr, elem_dtype::fp32, n, 1, hd});
  cpu::kv_store({ik.data(), idim, b.slot_mapping, raw.data(), nullptr, elem_dtype::fp32, n, 1, idim});
  cpu::index_compress({b, raw.data(), comp.data(), idim, bs, group});
  // group g of positions [4g, 4g+4) sits in block blocks[g/2], row g%2
  const std::vector<int32_t> blocks{3, 6, 1, 0, 7};
  for (int32_t g = 0; g < 9; ++g)
    for (int32_t i = 0; i < idim; ++i) {
      const float mean = (((ik[(4 * g) * idim + i] + ik[(4 * g + 1) * idim + i]) + ik[(4 * g + 2) * idim + i]) +
                          ik[(4 * g + 3) * idim + i]) * 0.25f;
      CHECK(comp[(blocks[g / 2] * 2 + g % 2) * idim + i] == mean);
    }
  std::vector<float> out(n * hq * hd);
  paged_attention_args at{b, q.data(), hq * hd, kreg.data(), vreg.data(), nullptr, nullptr, elem_dtype::fp32,
                          out.data(), hq * hd, hq, hkv, hd, bs};
  cpu::sparse_attention({at, iq.data(), idim, comp.data(), idim, window, top_k, group});
  for (int32_t p = 0; p < n; ++p) {
    // naive: score every eligible group, sort by (score desc, group asc)
    const int32_t win_start = std::max(0, p - window + 1);
    std::vector<std::pair<float, int32_t>> cand;
    for (int32_t g = 0; 4 * g + 3 < win_start; ++g) {
      float s = 0;
      for (int32_t i = 0; i < idim; ++i) s += iq[p * idim + i] * comp[(blocks[g / 2] * 2 + g % 2) * idim + i];
      cand.push_back({-s, g});
    }
    std::sort(cand.begin(), cand.end());
    std::vector<int32_t> keys_at;
    for (size_t c = 0; c < cand.size() && c < size_t(top_k); ++c)
      for (int32_t t = 0; t < group; ++t) keys_at.push_back(cand[c].second * group + t);
    for (int32_t t = win_start; t <= p; ++t) keys_at.push_back(t);
    for (int32_t h = 0; h < hq; ++h) {
      std::vector<double> sc;
      for (int32_t j : keys_at) {
        double s = 0;
        for (int32_t i = 0; i < hd; ++i) s += double(q[p * hq * hd + h * hd + i]) * keys[j * hd + i];
        sc.push_back(s / std::sqrt(double(hd)));
      }
      const double m = *std::max_element(sc.begin(), sc.end());
      double l = 0;
      for (double& s : sc) l += (s = std::exp(s - m));
      for (int32_t i = 0; i < hd; ++i) {
        double o = 0;
        for (size_t j = 0; j < keys_at.size(); ++j) o += sc[j] / l * vals[keys_at[j] * hd + i];
        CHECK(out[p * hq * hd + h * hd + i] == Approx(o).margin(1e-5));
      }
    }
  }
}

TEST_CASE("gated delta rule per token equals the matrix recurrence", "[kernels]") {
  const int32_t H = 2, dk = 4, dv = 3, n = 6;
  host_batch hb;
  hb.add(0, n, {0, 1});
  const int32_t C = H * (2 * dk + dv), G = H * (2 + dv);
  const auto x = random_floats(30, n * C), abg = random_floats(31, n * G, 2.0f), bias = random_floats(32, H);
  const size_t state_bytes = size_t(H) * dv * dk * 4;
  std::vector<unsigned char> state(state_bytes, 0);
  std::vector<float> out(n * H * dv);
  cpu::gdn({hb.view(), x.data(), C, abg.data(), G, bias.data(), out.data(), H * dv, state.data(), state_bytes, 0, 1, H,
            dk, dv});
  const auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int32_t h = 0; h < H; ++h) {
    std::vector<double> S(dv * dk, 0.0); // S[i][j]
    for (int32_t t = 0; t < n; ++t) {
      const float* row = x.data() + t * C;
      std::vector<double> q(dk), k(dk), v(dv);
      double qn = 0, kn = 0;
      for (int32_t j = 0; j < dk; ++j) qn += double(row[h * dk + j]) * row[h * dk + j];
      for (int32_t j = 0; j < dk; ++j) kn += double(row[H * dk + h * dk + j]) * row[H * dk + h * dk + j];
      for (int32_t j = 0; j < dk; ++j) {
        q[j] = row[h * dk + j] / std::sqrt(qn + 1e-6) / std::sqrt(double(dk));
        k[j] = row[H * dk + h * dk + j] / std::sqrt(kn + 1e-6);
      }
      for (int32_t i = 0; i < dv; ++i) v[i] = row[2 * H * dk + h * dv + i];
      const double a = sig(abg[t * G + h] + bias[h]), b = sig(abg[t * G + H + h]);
      // S ← a·S·(I − b·k·kᵀ) + b·v·kᵀ
      std::vector<double> M(dk * dk), Sn(dv * dk);
      for (int32_t r = 0; r < dk; ++r)
        for (int32_t c = 0; c < dk; ++c) M[r * dk + c] = (r == c ? 1.0 : 0.0) - b * k[r] * k[c];
      for (int32_t i = 0; i < dv; ++i)
        for (int32_t c = 0; c < dk; ++c) {
          double s = 0;
          for (int32_t r = 0; r < dk; ++r) s += a * S[i * dk + r] * M[r * dk + c];
          Sn[i * dk + c] = s + b * v[i] * k[c];
        }
      S = Sn;
      for (int32_t i = 0; i < dv; ++i) {
        double o = 0;
        for (int32_t j = 0; j < dk; ++j) o += S[i * dk + j] * q[j];
        const double g = abg[t * G + 2 * H + h * dv + i];
        CHECK(out[t * H * dv + h * dv + i] == Approx(o * g * sig(g)).margin(1e-5));
      }
    }
  }
}

TEST_CASE("conv and gdn state continue exactly across a split", "[kernels]") {
  const int32_t H = 2, dk = 4, dv = 4, n = 9, C = H * (2 * dk + dv), G = H * (2 + dv), width = 4;
  const auto x = random_floats(40, n * C), abg = random_floats(41, n * G), bias = random_floats(42, H),
             w = random_floats(43, C * width);
  const size_t conv_bytes = size_t(width - 1) * C * 4, slot_bytes = conv_bytes + size_t(H) * dv * dk * 4;
  const auto run = [&](std::vector<int32_t> splits) {
    std::vector<unsigned char> state(slot_bytes * 2, 0);
    std::vector<float> conv(n * C), out(n * H * dv);
    int32_t at = 0;
    for (int32_t len : splits) {
      host_batch hb;
      hb.add(at, len, {0, 1, 2}, 1);
      const device_batch b = hb.view();
      cpu::causal_conv({b, x.data() + at * C, C, conv.data() + at * C, C, w.data(), state.data(), slot_bytes, 0, 2, C,
                        width, true});
      cpu::gdn({b, conv.data() + at * C, C, abg.data() + at * G, G, bias.data(), out.data() + at * H * dv, H * dv,
                state.data(), slot_bytes, conv_bytes, 2, H, dk, dv});
      at += len;
    }
    return std::make_pair(conv, out);
  };
  const auto whole = run({9}), split = run({3, 1, 5});
  CHECK(std::memcmp(whole.first.data(), split.first.data(), whole.first.size() * 4) == 0);
  CHECK(std::memcmp(whole.second.data(), split.second.data(), whole.second.size() * 4) == 0);
  // the conv itself: y_t = silu(Σ_j w_j x_{t-3+j}) with zeros before the start
  for (int32_t t = 0; t < n; ++t)
    for (int32_t c = 0; c < C; c += 5) {
      double acc = 0;
      for (int32_t j = 0; j < width; ++j) {
        const int32_t src = t - (width - 1) + j;
        if (src >= 0) acc += double(w[c * width + j]) * x[src * C + c];
      }
      CHECK(whole.first[t * C + c] == Approx(acc / (1 + std::exp(-acc))).margin(1e-5));
    }
}

TEST_CASE("ple n-gram buckets depend on the last 3 ids and continue across a split", "[kernels]") {
  const std::vector<int32_t> toks{5, 6, 7, 5, 6, 7, 9, 5, 6, 7};
  const auto run = [&](std::vector<int32_t> splits) {
    std::vector<unsigned char> state(16, 0);
    std::vector<int32_t> buckets(toks.size());
    int32_t at = 0;
    for (int32_t len : splits) {
      host_batch hb;
      hb.add(at, len, {0, 1, 2}, 0, std::vector<int32_t>(toks.begin() + at, toks.begin() + at + len));
      cpu::ple_ngram({hb.view(), buckets.data() + at, state.data(), 16, 0, 1, 3, 1 << 20, 99});
      at += len;
    }
    return buckets;
  };
  const auto whole = run({10});
  CHECK(whole == run({2, 5, 3}));
  CHECK(whole[2] == whole[5]); // 5 6 7
  CHECK(whole[5] == whole[9]);
  CHECK(whole[4] != whole[8]); // 7 5 6 vs 9 5 6: differ only in the oldest id
  CHECK(whole[4] != whole[1]); // 7 5 6 vs (start) 5 6
  CHECK(whole[3] != whole[7]); // 6 7 5 vs 7 9 5
}

TEST_CASE("sampling: greedy ties to the lowest id, temperature draws keyed by (seed, position)", "[kernels]") {
  const std::vector<float> tie{0.0f, 2.0f, 1.0f, 2.0f};
  CHECK(cpu::sample_one(tie.data(), 4, 0.0f, 1, 0) == 1);
  const std::vector<float> logits{0.0f, std::log(3.0f)}; // p = 1/4, 3/4
  int32_t ones = 0;
  for (int32_t pos = 0; pos < 4000; ++pos) {
    const int32_t a = cpu::sample_one(logits.data(), 2, 1.0f, 77, pos);
    CHECK(a == cpu::sample_one(logits.data(), 2, 1.0f, 77, pos));
    ones += a;
  }
  CHECK(ones > 2850);
  CHECK(ones < 3150);
  int32_t differ = 0;
  for (int32_t pos = 0; pos < 200; ++pos)
    differ += cpu::sample_one(logits.data(), 2, 1.0f, 77, pos) != cpu::sample_one(logits.data(), 2, 1.0f, 78, pos);
  CHECK(differ > 20);
}
