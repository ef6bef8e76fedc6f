// The Qwen3.5 forward as transformers defines it (notes/real-models.md §1), in plain C++: token after
// token, dot products accumulated in double, the GDN state S (dk x dv per value head) in double.
// It is the faithful reference the fixtures check (tests/test_models_qwen3_5.cpp) and that a kernel-table
// forward is to be held against; it is not the node's forward (no batching, no paging, no device).
//
// Per layer: h += mixer(RMSNorm_(1+w)(h)); h += MLP(RMSNorm_(1+w)(h)), the mixer being
//   GDN:  q|k|v = silu(causal depthwise conv_K(W_qkv x)); q^ = q/sqrt(|q|^2 + 1e-6)/sqrt(dk), k^ likewise
//         without 1/sqrt(dk); value head h reads key head h / (nv/nk); beta = sigmoid(b);
//         g = -exp(A_log) softplus(a + dt_bias); S <- e^g S; S <- S + k^ (beta (v - S^T k^))^T; o = S^T q^;
//         y = RMSNorm_dv(o) w silu(z); out = W_out y
//   attention: q, gate from q_proj's per-head halves; q, k RMS-normed per head (1+w); NeoX RoPE on the
//         first rotary_dim dims; causal softmax(q k^T / sqrt(hd)) v with GQA; out = W_o (attn sigmoid(gate))
// then logits = lm_head(RMSNorm_(1+w)(h)).
// Runs on: the caller's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/models/hf_model.hpp"

namespace ordo {

// fp32 logits of every position of `tokens`, row-major [tokens.size(), vocab_size].
// Throws model_load_error if a token id is outside the vocabulary.
std::vector<float> qwen3_5_reference_logits(const hf_checkpoint& checkpoint, const std::vector<int32_t>& tokens);

} // namespace ordo
