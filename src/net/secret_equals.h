// Constant-time comparison of secrets (API keys, the auth tokens of the KV transfer's
// and the pool's HELLO), so a secret cannot be found byte by byte from response timings.
//
// Thread safety: a pure function.
#pragma once

#include <string_view>

namespace tandem::net {

// Equal contents, compared without an early exit (the length is not hidden).
bool SecretEquals(std::string_view given, std::string_view secret);

}  // namespace tandem::net
