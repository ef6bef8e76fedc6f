// The chat template: turns chat messages into the prompt tokens of the byte tokenizer, in
// Zephyr's layout with the tokenizer's EOS closing each turn (docs/chat-template.md):
//
//   BOS "<|system|>\n" content EOS "\n" "<|user|>\n" content EOS "\n" ... "<|assistant|>\n"
//
// A turn ends only at an EOS token, which no text can produce, so message content can never
// forge a turn; the prompt ends with the assistant header so the model answers as the
// assistant, and its own EOS ends its answer (finish_reason "stop"). Pure; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ordo {

enum class chat_role { system, user, assistant };

// "system" | "user" | "assistant": the one place a role becomes text.
std::string_view to_string(chat_role role);

// The role named `name` exactly, or nullopt.
std::optional<chat_role> parse_chat_role(std::string_view name);

struct chat_message {
  chat_role role = chat_role::user;
  std::string content; // UTF-8 text; a list of text parts arrives joined with "\n"
};

// The prompt token ids of `messages` (in order), starting with BOS and ending with the
// assistant header.
std::vector<int32_t> render_chat_prompt(const std::vector<chat_message>& messages);

} // namespace ordo
