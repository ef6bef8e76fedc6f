#include "runtime/models/qwen3_5_reference.hpp"

#include <cmath>
#include <string>

namespace ordo {

namespace {

using vec = std::vector<double>;

struct weights {
  const hf_checkpoint& ck;
  const host_tensor& at(const std::string& name) const {
    const auto it = ck.slots.find(name);
    if (it == ck.slots.end()) throw model_load_error("qwen3_5 reference: slot " + name + " was not loaded");
    return it->second;
  }
};

// y = W x for W [rows, cols].
vec matvec(const host_tensor& w, const vec& x) {
  const int64_t rows = w.shape[0], cols = w.shape[1];
  vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w.data.data() + r * cols;
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(wr[c]) * x[static_cast<size_t>(c)];
    y[static_cast<size_t>(r)] = s;
  }
  return y;
}

// RMSNorm of x[off, off + n) with the (already folded) weight w: x / sqrt(mean(x^2) + eps) * w.
void rms_norm(vec& x, size_t off, size_t n, const std::vector<float>& w, double eps) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[off + i] = x[off + i] * scale * w[i];
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); } // torch's threshold 20

struct gdn_state {
  std::vector<vec> qkv_history; // the conv's input, one row per token so far
  std::vector<vec> s;           // per value head, dk x dv, row-major
};

struct attention_state {
  std::vector<vec> k, v; // per token, nkv * hd, after norm and RoPE (k)
};

vec gdn_forward(const weights& w, const hf_dims& d, const std::string& p, gdn_state& st, const vec& x) {
  const int64_t nk = d.gdn_key_heads, nv = d.gdn_value_heads, dk = d.gdn_key_dim, dv = d.gdn_value_dim;
  const int64_t conv_dim = d.gdn_conv_dim(), K = d.gdn_conv_kernel, r = nv / nk;
  st.qkv_history.push_back(matvec(w.at(p + "gdn.w_qkv"), x));
  const vec z = matvec(w.at(p + "gdn.w_z"), x);
  const vec b = matvec(w.at(p + "gdn.w_b"), x);
  const vec a = matvec(w.at(p + "gdn.w_a"), x);

  // Causal depthwise conv over the last K inputs (zeros before the first), then silu.
  const auto& conv = w.at(p + "gdn.conv").data;
  const int64_t t = static_cast<int64_t>(st.qkv_history.size()) - 1;
  vec qkv(static_cast<size_t>(conv_dim), 0.0);
  for (int64_t c = 0; c < conv_dim; ++c) {
    double s = 0.0;
    for (int64_t j = 0; j < K; ++j) {
      const int64_t src = t - (K - 1) + j;
      if (src >= 0) s += static_cast<double>(conv[c * K + j]) * st.qkv_history[static_cast<size_t>(src)][c];
    }
    qkv[static_cast<size_t>(c)] = silu(s);
  }

  if (st.s.empty()) st.s.assign(static_cast<size_t>(nv), vec(static_cast<size_t>(dk * dv), 0.0));
  const auto& neg_exp_a = w.at(p + "gdn.neg_exp_a").data;
  const auto& dt_bias = w.at(p + "gdn.dt_bias").data;
  const auto& norm_w = w.at(p + "gdn.norm").data;
  vec y(static_cast<size_t>(nv * dv), 0.0);
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t kh = h / r;
    vec q(qkv.begin() + kh * dk, qkv.begin() + (kh + 1) * dk);
    vec k(qkv.begin() + nk * dk + kh * dk, qkv.begin() + nk * dk + (kh + 1) * dk);
    const double* v = qkv.data() + 2 * nk * dk + h * dv;
    double qq = 0.0, kk = 0.0;
    for (int64_t i = 0; i < dk; ++i) {
      qq += q[i] * q[i];
      kk += k[i] * k[i];
    }
    const double qs = 1.0 / std::sqrt(qq + 1e-6) / std::sqrt(static_cast<double>(dk));
    const double ks = 1.0 / std::sqrt(kk + 1e-6);
    for (int64_t i = 0; i < dk; ++i) {
      q[i] *= qs;
      k[i] *= ks;
    }
    const double beta = sigmoid(b[h]);
    const double g = static_cast<double>(neg_exp_a[h]) * softplus(a[h] + static_cast<double>(dt_bias[h]));
    const double decay = std::exp(g);
    vec& S = st.s[static_cast<size_t>(h)];
    for (double& e : S) e *= decay;
    for (int64_t j = 0; j < dv; ++j) { // S <- S + k (beta (v - S^T k))^T, column j at a time
      double kv_mem = 0.0;
      for (int64_t i = 0; i < dk; ++i) kv_mem += S[i * dv + j] * k[i];
      const double delta = (v[j] - kv_mem) * beta;
      for (int64_t i = 0; i < dk; ++i) S[i * dv + j] += k[i] * delta;
    }
    for (int64_t j = 0; j < dv; ++j) {
      double o = 0.0;
      for (int64_t i = 0; i < dk; ++i) o += S[i * dv + j] * q[i];
      y[static_cast<size_t>(h * dv + j)] = o;
    }
    rms_norm(y, static_cast<size_t>(h * dv), static_cast<size_t>(dv), norm_w, d.rms_norm_eps);
    for (int64_t j = 0; j < dv; ++j) y[static_cast<size_t>(h * dv + j)] *= silu(z[static_cast<size_t>(h * dv + j)]);
  }
  return matvec(w.at(p + "gdn.w_out"), y);
}

// NeoX rotate-half RoPE on the first rotary_dim dims of x[off, off + hd).
void rope(vec& x, size_t off, const hf_dims& d, int64_t position) {
  const int64_t half = d.rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = 1.0 / std::pow(d.rope_theta, static_cast<double>(2 * i) / d.rotary_dim);
    const double angle = static_cast<double>(position) * inv_freq;
    const double c = std::cos(angle), s = std::sin(angle);
    const double x1 = x[off + i], x2 = x[off + i + half];
    x[off + i] = x1 * c - x2 * s;
    x[off + i + half] = x2 * c + x1 * s;
  }
}

vec attention_forward(const weights& w, const hf_dims& d, const std::string& p, attention_state& st, const vec& x,
                      int64_t position) {
  const int64_t nh = d.num_heads, nkv = d.num_kv_heads, hd = d.head_dim, group = nh / nkv;
  vec q = matvec(w.at(p + "attn.w_q"), x);
  const vec gate = matvec(w.at(p + "attn.w_gate"), x);
  vec k = matvec(w.at(p + "attn.w_k"), x);
  vec v = matvec(w.at(p + "attn.w_v"), x);
  const auto& qn = w.at(p + "attn.q_norm").data;
  const auto& kn = w.at(p + "attn.k_norm").data;
  for (int64_t h = 0; h < nh; ++h) {
    rms_norm(q, static_cast<size_t>(h * hd), static_cast<size_t>(hd), qn, d.rms_norm_eps);
    rope(q, static_cast<size_t>(h * hd), d, position);
  }
  for (int64_t h = 0; h < nkv; ++h) {
    rms_norm(k, static_cast<size_t>(h * hd), static_cast<size_t>(hd), kn, d.rms_norm_eps);
    rope(k, static_cast<size_t>(h * hd), d, position);
  }
  st.k.push_back(std::move(k));
  st.v.push_back(std::move(v));
  const size_t n = st.k.size();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  vec out(static_cast<size_t>(nh * hd), 0.0);
  vec scores(n);
  for (int64_t h = 0; h < nh; ++h) {
    const int64_t kvh = h / group;
    double m = -INFINITY;
    for (size_t t = 0; t < n; ++t) {
      double s = 0.0;
      for (int64_t i = 0; i < hd; ++i) s += q[h * hd + i] * st.k[t][kvh * hd + i];
      scores[t] = s * scale;
      m = std::max(m, scores[t]);
    }
    double sum = 0.0;
    for (size_t t = 0; t < n; ++t) sum += (scores[t] = std::exp(scores[t] - m));
    for (size_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < hd; ++i) out[h * hd + i] += scores[t] / sum * st.v[t][kvh * hd + i];
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] *= sigmoid(gate[i]);
  return matvec(w.at(p + "attn.w_o"), out);
}

vec mlp_forward(const weights& w, const std::string& p, const vec& x) {
  const vec g = matvec(w.at(p + "mlp.w_gate"), x);
  vec u = matvec(w.at(p + "mlp.w_up"), x);
  for (size_t i = 0; i < u.size(); ++i) u[i] *= silu(g[i]);
  return matvec(w.at(p + "mlp.w_down"), u);
}

} // namespace

std::vector<float> qwen3_5_reference_logits(const hf_checkpoint& checkpoint, const std::vector<int32_t>& tokens) {
  const hf_dims& d = checkpoint.dims;
  const weights w{checkpoint};
  const int64_t H = d.hidden_size, V = d.vocab_size;
  std::vector<gdn_state> gdn(static_cast<size_t>(d.num_layers));
  std::vector<attention_state> attn(static_cast<size_t>(d.num_layers));
  const auto& embed = w.at("embed").data;
  std::vector<float> logits;
  logits.reserve(tokens.size() * static_cast<size_t>(V));
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int32_t id = tokens[t];
    if (id < 0 || id >= V)
      throw model_load_error("qwen3_5 reference: token id " + std::to_string(id) + " is outside the vocabulary of " +
                             std::to_string(V));
    vec h(embed.begin() + id * H, embed.begin() + (id + 1) * H);
    for (int32_t l = 0; l < d.num_layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      vec x = h;
      rms_norm(x, 0, static_cast<size_t>(H), w.at(p + "ln1").data, d.rms_norm_eps);
      const vec mixed = d.layer_kinds[l] == hf_layer_kind::linear_attention
                            ? gdn_forward(w, d, p, gdn[l], x)
                            : attention_forward(w, d, p, attn[l], x, static_cast<int64_t>(t));
      for (int64_t i = 0; i < H; ++i) h[i] += mixed[i];
      x = h;
      rms_norm(x, 0, static_cast<size_t>(H), w.at(p + "ln2").data, d.rms_norm_eps);
      const vec m = mlp_forward(w, p, x);
      for (int64_t i = 0; i < H; ++i) h[i] += m[i];
    }
    rms_norm(h, 0, static_cast<size_t>(H), w.at("final_norm").data, d.rms_norm_eps);
    const vec row = matvec(w.at("lm_head"), h);
    for (double v : row) logits.push_back(static_cast<float>(v));
  }
  return logits;
}

} // namespace ordo
