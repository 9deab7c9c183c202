// Nesting depth of a JSON text, measured without parsing it.
//
// nlohmann::json parses iteratively but serializes (dump) recursively, one stack frame
// per level: a request body of a few MiB of "[[[[..." would overflow a thread's stack
// when the proxy re-serializes it. The HTTP front ends check the depth first and refuse
// deeper documents with a 400.
// Thread safety: pure function.
#pragma once

#include <string_view>

namespace tandem {

// The deepest level JSON request bodies may nest to (objects and arrays both count).
inline constexpr int kMaxJsonDepth = 512;

// True if `text` opens more than `max_depth` arrays/objects at some point. Brackets
// inside strings (escapes included) do not count; the text need not be valid JSON.
bool JsonNestingExceeds(std::string_view text, int max_depth);

}  // namespace tandem
