// The request and response field `kv_transfer_params` of the PD protocol
// (docs/KV_TRANSFER.md), between JSON and the engine's typed KvTransferRequest /
// KvTransferParams. The request's field is parsed once, here, when the HTTP body is.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "engine/engine.h"

namespace tandem::server {

struct RequestKvTransfer : KvTransferRequest {
  std::string problem;  // why remote_prefill was not usable (the request then computes locally)
};

// From the request's `kv_transfer_params` JSON object. Never fails: a malformed
// remote_prefill is reported in `problem` and the prompt is computed here.
RequestKvTransfer ParseRequestKvTransfer(const nlohmann::ordered_json& j);
// The same from JSON text (empty = absent).
RequestKvTransfer ParseRequestKvTransfer(const std::string& json);

// The response's `kv_transfer_params` object for a kept producer request.
std::string KvTransferParamsJson(const KvTransferParams& params);

}  // namespace tandem::server
