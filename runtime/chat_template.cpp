#include "runtime/chat_template.hpp"

#include "runtime/tokenizer.hpp"

namespace ordo {

namespace {

void append_text(std::vector<int32_t>& ids, std::string_view text) {
  for (unsigned char c : text)
    ids.push_back(static_cast<int32_t>(c));
}

void append_header(std::vector<int32_t>& ids, chat_role role) {
  append_text(ids, "<|");
  append_text(ids, to_string(role));
  append_text(ids, "|>\n");
}

} // namespace

std::string_view to_string(chat_role role) {
  switch (role) {
  case chat_role::system:
    return "system";
  case chat_role::user:
    return "user";
  case chat_role::assistant:
    return "assistant";
  }
  return "user";
}

std::optional<chat_role> parse_chat_role(std::string_view name) {
  for (chat_role role : {chat_role::system, chat_role::user, chat_role::assistant})
    if (name == to_string(role))
      return role;
  return std::nullopt;
}

std::vector<int32_t> render_chat_prompt(const std::vector<chat_message>& messages) {
  std::vector<int32_t> ids{byte_tokenizer::bos_id};
  for (const chat_message& m : messages) {
    append_header(ids, m.role);
    append_text(ids, m.content);
    ids.push_back(byte_tokenizer::eos_id);
    append_text(ids, "\n");
  }
  append_header(ids, chat_role::assistant);
  return ids;
}

} // namespace ordo
