// The UTF-8 encoder: one code point to its bytes. The grammar compiler, the tokenizer's
// unicode helpers and the Jinja interpreter all encode through it.
//
// It checks nothing: surrogates encode as they are, and a value above U+10FFFF takes the
// four-byte form with the same shifts and masks (its lead byte no longer a valid one).
// Callers that must emit valid UTF-8 check the range first (unicode::AppendUtf8 maps
// such values to U+FFFD).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace tandem {

// Bytes in the encoding of `code_point`: 1 below U+0080, 2 below U+0800, 3 below
// U+10000, else 4.
int Utf8EncodedLength(uint32_t code_point);

// Writes the encoding of `code_point` to out[0, Utf8EncodedLength(code_point)) and
// returns that length. `out` has room for at least 4 bytes.
int EncodeUtf8(uint32_t code_point, uint8_t* out);

// Appends the encoding of `code_point` to `*out`.
void AppendUtf8(uint32_t code_point, std::string* out);

}  // namespace tandem
