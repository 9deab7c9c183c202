#include "net/http_response_writer.h"

#include "net/openai_error.h"

namespace tandem::net {

bool SendJson(HttpResponseWriter& writer, int status, std::string json) {
  return writer.SendResponse(status, {{"Content-Type", "application/json"}}, std::move(json));
}

bool SendError(HttpResponseWriter& writer, int status, std::string_view message,
               std::string_view type, std::string_view param) {
  return SendJson(writer, status, OpenAiErrorJson(status, message, type, param));
}

}  // namespace tandem::net
