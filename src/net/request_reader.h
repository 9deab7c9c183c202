// The server's request reading, apart from the socket: Beast's request parser set up with
// HttpServerOptions' limits, the HTTP answer for each way reading can fail, and the move
// of a parsed message into an HttpRequest. ServerConnection drives these from its socket;
// fuzz/http_fuzz.cc and request_reader_test.cc feed bytes to them directly, so both see
// exactly the server's limits and error mapping.
//
// Internal to tandem_net (exposes Beast), like server_connection.h.
// Thread safety: free functions; a parser belongs to one request on one thread.
#pragma once

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "net/http_request.h"
#include "net/http_server.h"

namespace tandem::net::internal {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Applies options.max_header_bytes (request line + fields) and options.max_body_bytes to
// a fresh parser. Precondition: nothing has been put into `parser` yet.
void ApplyRequestLimits(const HttpServerOptions& options, RequestParser* parser);

// Whether the parsed header asks for "100 Continue" before the body is sent.
// Precondition: parser.is_header_done().
bool WantsContinue(const RequestParser& parser);

// How to answer a request whose reading failed with `ec`.
struct ReadFailure {
  int status = 0;       // 400, 413 or 431; 0: close without answering (EOF, reset, timeout)
  std::string message;  // for the OpenAI error body; empty when status is 0
};
ReadFailure ClassifyReadError(const boost::system::error_code& ec,
                              const HttpServerOptions& options);

// Moves the parsed message out of `parser` into an HttpRequest (remote_address is left
// empty) and reports whether the client wants the connection kept alive.
// Precondition: parser.is_done().
HttpRequest TakeRequest(RequestParser& parser, bool* keep_alive);

// One request read from a byte string, as a connection would read it if the peer sent
// exactly `bytes` and then closed its side (tests and the fuzz target).
struct BytesRead {
  bool ok = false;          // a whole request was parsed
  ReadFailure failure;      // when !ok
  HttpRequest request;      // when ok
  bool keep_alive = false;  // when ok
  size_t consumed = 0;      // bytes of `bytes` the request took (when ok)
};
// `chunk_bytes` > 0 hands the bytes to the parser at most that many at a time, as socket
// reads of that size would; 0 hands over everything at once.
BytesRead ReadRequestFromBytes(std::string_view bytes, const HttpServerOptions& options,
                               size_t chunk_bytes = 0);

}  // namespace tandem::net::internal
