#include "net/openai_error.h"

#include <nlohmann/json.hpp>

namespace tandem::net {

std::string_view DefaultErrorType(int status) {
  switch (status) {
    case 400: return "BadRequestError";
    case 401: return "AuthenticationError";
    case 403: return "PermissionDeniedError";
    case 404: return "NotFoundError";
    case 405: return "MethodNotAllowedError";
    case 408: return "RequestTimeoutError";
    case 409: return "ConflictError";
    case 413: return "RequestEntityTooLargeError";
    case 422: return "UnprocessableEntityError";
    case 429: return "RateLimitError";
    case 431: return "RequestHeaderFieldsTooLargeError";
    case 501: return "NotImplementedError";
    case 503: return "ServiceUnavailableError";
    case 504: return "GatewayTimeoutError";
    default: return status >= 500 ? "InternalServerError" : "BadRequestError";
  }
}

std::string OpenAiErrorJson(int status, std::string_view message, std::string_view type,
                            std::string_view param) {
  nlohmann::json error = {
      {"message", message},
      {"type", type.empty() ? DefaultErrorType(status) : type},
      {"param", nullptr},
      {"code", status},
  };
  if (!param.empty()) error["param"] = param;
  // Replace invalid UTF-8 (e.g. echoed request bytes) instead of throwing.
  return nlohmann::json{{"error", std::move(error)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

std::string_view HttpReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace tandem::net
