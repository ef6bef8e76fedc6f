// Paged causal attention (GQA) over the KV arena, and the store of K/V rows into their slots.
#pragma once

#include "kernels/kernel_args.hpp"

namespace ordo::cpu {

void kv_store(const kv_store_args& a);
void paged_attention(const paged_attention_args& a);

} // namespace ordo::cpu
