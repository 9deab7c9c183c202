// Byte sizes as people write them on command lines ("4GiB", "512MiB", "32MB", "1000").
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace tandem {

// "4GiB", "512MiB", "1.5GiB", "2G", "1000000": bytes. Suffixes with "i" are binary
// (KiB, MiB, GiB, TiB); K/M/G/T with or without "B" are decimal. InvalidArgument for
// anything else, and for sizes below one byte or above 9e18.
StatusOr<int64_t> ParseByteSize(std::string_view text);

}  // namespace tandem
