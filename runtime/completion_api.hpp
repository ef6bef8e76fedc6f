// The OpenAI-shaped completions and chat completions APIs as pure functions: parse request
// bodies into `completion_request`, render results, stream chunks and errors as JSON / SSE text.
// No I/O, no CAF; callable from any thread.
#pragma once

#include "messages/request.hpp"
#include "runtime/pd_params.hpp"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace ordo {

// What a request may ask for; comes from the node config and the model.
struct api_limits {
  int max_context = 4096;      // prompt tokens + max_tokens must fit
  int vocab_size = 258;        // token ids in a prompt must be in [0, vocab_size)
  int max_tokens_limit = 0;    // extra cap on max_tokens; <= 0 means only max_context caps it
  int default_max_tokens = 16; // when the body has no max_tokens (OpenAI's default)
  // false: the model has no tokenizer here (a Hugging Face checkpoint until issue 37 part 1b), so
  // a text prompt, chat messages or a stop string are refused; token-id prompts are served.
  bool text_prompts = true;
};

// A request the API rejects; `status` is the HTTP status (4xx for the client's fault).
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
};

// A parsed request and how to answer it. `chat`: came from /v1/chat/completions (render with
// the render_chat_* functions); `include_usage`: stream_options.include_usage, send
// render_usage_chunk before render_stream_done.
struct api_request {
  completion_request request;
  bool chat = false;
  bool include_usage = false;
  // kv_transfer_params naming a prefill node: what they claim, checked by the node against its
  // secret and pd.peers (runtime/pd_params.hpp) before the request goes anywhere.
  kv_params_claim kv_claim;
};

// Parses a POST /v1/completions body. A text prompt is tokenized (BOS + bytes); token ids are
// taken as given. request_id is left 0 for the caller to assign. Optional "media" spans
// [{"offset", "length", "hash"}] must lie inside the prompt and not overlap; they come back
// sorted by offset (hash: 1–16 hex digits or an unsigned integer). Sampling fields shared with
// chat: max_tokens, temperature, seed, stream, stream_options, cache_salt, n, model, stop (a
// string or up to 4 strings of 1–64 bytes, as byte token ids without BOS).
// Bodies nested deeper than json_max_depth are rejected before parsing; every message is at
// most api_message_max_bytes long (runtime/json_guard.hpp).
std::variant<api_request, api_error> parse_completion_request(const std::string& body,
                                                              const api_limits& limits);

// Parses a POST /v1/chat/completions body: "messages" [{"role": "system"|"user"|"assistant",
// "content": string or [{"type": "text", "text": string}]}] becomes the prompt through the chat
// template (runtime/chat_template.hpp); the sampling fields are those of completions, plus
// max_completion_tokens (OpenAI's name for max_tokens).
std::variant<api_request, api_error> parse_chat_completion_request(const std::string& body,
                                                                   const api_limits& limits);

// Parses a POST /admin/evict body {"tier":"hbm"} into the tier name.
std::variant<std::string, api_error> parse_evict_request(const std::string& body);

// --- /v1/completions ---------------------------------------------------------------------------

// The full (non-streaming) response of a finished request; `text` is the decoded completion.
std::string render_completion(const completion_result& result, const std::string& text,
                              const std::string& model_name, int64_t created);

// One SSE event "data: {...}\n\n" carrying sampled tokens and their text (finish_reason null).
std::string render_stream_chunk(uint64_t request_id, const std::string& text_piece,
                                const std::vector<int32_t>& token_ids, const std::string& model_name,
                                int64_t created);

// The last SSE event before the usage chunk / [DONE]: finish_reason, usage and the ordo
// object, no new text.
std::string render_stream_final(const completion_result& result, const std::string& model_name,
                                int64_t created);

// --- /v1/chat/completions ----------------------------------------------------------------------

// The full response: object "chat.completion", id "chatcmpl-N", choices[0].message
// {"role": "assistant", "content": text}, finish_reason, usage and the ordo object.
std::string render_chat_completion(const completion_result& result, const std::string& text,
                                   const std::string& model_name, int64_t created);

// The first SSE event of a chat stream, before any token: delta {"role": "assistant",
// "content": ""}. OpenAI clients take the role from it, so it must come even when no token
// follows (a stop sequence at the very start).
std::string render_chat_stream_role(uint64_t request_id, const std::string& model_name,
                                    int64_t created);

// Sampled tokens of a chat stream: delta {"content": text_piece}, plus token_ids.
std::string render_chat_stream_chunk(uint64_t request_id, const std::string& text_piece,
                                     const std::vector<int32_t>& token_ids,
                                     const std::string& model_name, int64_t created);

// The last chat event before the usage chunk / [DONE]: an empty delta, finish_reason and the
// ordo object (usage only in render_usage_chunk, so clients that add up usage count it once).
std::string render_chat_stream_final(const completion_result& result, const std::string& model_name,
                                     int64_t created);

// --- both --------------------------------------------------------------------------------------

// stream_options.include_usage: the event after the final one, "choices": [] and usage
// (object "text_completion" or, for `chat`, "chat.completion.chunk").
std::string render_usage_chunk(const completion_result& result, bool chat,
                               const std::string& model_name, int64_t created);

// GET /v1/models: {"object": "list", "data": [{"id", "object": "model", "created",
// "owned_by": "ordo"}]}.
std::string render_models(const std::string& model_name, int64_t created);

// "data: [DONE]\n\n": ends every stream.
std::string render_stream_done();

// {"error":{"message":..,"type":..,"code":null}}
std::string render_error(const api_error& error);

// An error in the middle of a stream, as an SSE event "data: {"error":...}\n\n".
std::string render_stream_error(const api_error& error);

// completion_failed (from the scheduler) as an api_error: invalid_request_error → 400,
// rate_limit_error → 429 (scheduler.max_waiting), else 500.
api_error to_api_error(const completion_failed& failed);

// 16 lowercase hex digits (JSON numbers would lose uint64 precision).
std::string format_digest(uint64_t digest);

} // namespace ordo
