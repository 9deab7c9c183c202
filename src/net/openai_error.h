// OpenAI-compatible error bodies and HTTP status reason phrases.
//
//   {"error":{"message":"...","type":"NotFoundError","param":null,"code":404}}
//
// `type` defaults to vLLM's name for the status ("BadRequestError", "NotFoundError",
// ...), `code` is the HTTP status, `param` is null unless given.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace tandem::net {

// The JSON error body. `type` empty = the default type for `status`; `param` empty = null.
std::string OpenAiErrorJson(int status, std::string_view message, std::string_view type = {},
                            std::string_view param = {});

// vLLM's error type name for an HTTP status ("BadRequestError" for 400, ...).
std::string_view DefaultErrorType(int status);

// The reason phrase for an HTTP status ("Not Found"), or "Unknown".
std::string_view HttpReasonPhrase(int status);

}  // namespace tandem::net
