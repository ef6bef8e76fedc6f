// The OpenAI-shaped completions API as pure functions: parse request bodies into
// `completion_request`, render results, stream chunks and errors as JSON / SSE text.
// No I/O, no CAF; callable from any thread.
#pragma once

#include "messages/request.hpp"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace ordo {

// What a request may ask for; comes from the node config and the model.
struct api_limits {
  int max_context = 4096;       // prompt tokens + max_tokens must fit
  int vocab_size = 258;         // token ids in a prompt must be in [0, vocab_size)
  int max_tokens_limit = 0;     // extra cap on max_tokens; <= 0 means only max_context caps it
  int default_max_tokens = 16;  // when the body has no max_tokens (OpenAI's default)
};

// A request the API rejects; `status` is the HTTP status (4xx for the client's fault).
struct api_error {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
};

// Parses a POST /v1/completions body. A text prompt is tokenized (BOS + bytes); token ids are
// taken as given. request_id is left 0 for the caller to assign. Optional "media" spans
// [{"offset", "length", "hash"}] must lie inside the prompt and not overlap; they come back
// sorted by offset (hash: 1–16 hex digits or an unsigned integer).
std::variant<completion_request, api_error> parse_completion_request(const std::string& body,
                                                                     const api_limits& limits);

// Parses a POST /admin/evict body {"tier":"hbm"} into the tier name.
std::variant<std::string, api_error> parse_evict_request(const std::string& body);

// The full (non-streaming) response of a finished request; `text` is the decoded completion.
std::string render_completion(const completion_result& result, const std::string& text,
                              const std::string& model_name, int64_t created);

// One SSE event "data: {...}\n\n" carrying one sampled token (finish_reason null).
std::string render_stream_chunk(uint64_t request_id, const std::string& text_piece,
                                 int32_t token_id, const std::string& model_name,
                                 int64_t created);

// The last SSE event before [DONE]: finish_reason, usage and the ordo object, no new text.
std::string render_stream_final(const completion_result& result, const std::string& model_name,
                                int64_t created);

// "data: [DONE]\n\n": ends every stream.
std::string render_stream_done();

// {"error":{"message":..,"type":..,"code":null}}
std::string render_error(const api_error& error);

// An error in the middle of a stream, as an SSE event "data: {"error":...}\n\n".
std::string render_stream_error(const api_error& error);

// completion_failed (from the scheduler) as an api_error: invalid_request_error → 400, else 500.
api_error to_api_error(const completion_failed& failed);

// 16 lowercase hex digits (JSON numbers would lose uint64 precision).
std::string format_digest(uint64_t digest);

} // namespace ordo
