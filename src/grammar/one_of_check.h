// Whether two JSON Schema alternatives can never match the same value — what `oneOf`
// needs for a grammar to keep its promise: the grammar lets any alternative through, so
// unless at most one can match every output, an output could match two and fail oneOf.
//
// Conservative: "true" is a proof, "false" means "could not prove it". Proofs:
//   - the kinds of value they allow do not meet (type, const, enum, inferred types;
//     integer is a kind of number);
//   - both are finite sets of values (const / enum) with none in common;
//   - both are objects that require the same property with different const values (a
//     discriminator), or one is closed (additionalProperties false) and the other
//     requires a property the first does not list.
// Local $refs ("#", "#/$defs/x", "#/definitions/x") are followed, to a bounded depth.
//
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

namespace tandem::grammar {

bool ProvablyDisjoint(const nlohmann::json& a, const nlohmann::json& b, const nlohmann::json& root);

}  // namespace tandem::grammar
