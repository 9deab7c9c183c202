// Standard base64 (RFC 4648, with padding): etcd's JSON gateway carries every key and
// value as base64.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace tandem::etcd {

std::string Base64Encode(std::string_view bytes);
// InvalidArgument on a character outside the alphabet or a bad length/padding.
StatusOr<std::string> Base64Decode(std::string_view text);

}  // namespace tandem::etcd
