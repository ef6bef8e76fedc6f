// The Qwen3.5 family (notes/real-models.md §1): dense Qwen3.5 text models, alone (`qwen3_5_text`,
// Qwen3_5ForCausalLM) or under a multimodal config (`qwen3_5`, Qwen3_5ForConditionalGeneration: text
// under text_config, tensors under model.language_model., the vision tower and MTP skipped), and
// Qwen3-Next with num_experts 0 (`qwen3_next`: the same math, GDN projections interleaved per key head).
//
// Slots, per layer i (prefix "layers.{i}."), all fp32:
//   ln1, ln2 [H]                       1 + w of input_layernorm / post_attention_layernorm
//   gdn.w_qkv [2nk*dk + nv*dv, H]      q | k | v rows (the conv's channel order)
//   gdn.w_z [nv*dv, H], gdn.w_b [nv, H], gdn.w_a [nv, H]
//   gdn.conv [2nk*dk + nv*dv, K]       depthwise, no bias
//   gdn.neg_exp_a [nv]                 -exp(A_log)
//   gdn.dt_bias [nv], gdn.norm [dv]    (the gated norm's w is plain, not 1 + w)
//   gdn.w_out [H, nv*dv]
//   attn.w_q, attn.w_gate [nh*hd, H]   q_proj's per-head [q gate] halves
//   attn.w_k, attn.w_v [nkv*hd, H], attn.w_o [H, nh*hd], attn.q_norm, attn.k_norm [hd] (1 + w)
//   mlp.w_gate, mlp.w_up [I, H], mlp.w_down [H, I]
// and embed [V, H], final_norm [H] (1 + w), lm_head [V, H] (the embedding's values when tied).
#pragma once

#include "runtime/models/hf_model.hpp"

namespace ordo {

const hf_family& qwen3_5_family();

} // namespace ordo
