// The request and response field `kv_transfer_params` of the PD protocol
// (docs/KV_TRANSFER.md), between JSON and the engine's KvTransferParams.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "engine/engine.h"

namespace tandem::server {

struct RequestKvTransfer {
  bool do_remote_decode = false;                 // a prefill request from the proxy
  std::optional<KvTransferParams> remote_prefill;  // a decode request with P's answer
  std::string problem;  // why remote_prefill was not usable (the request then computes locally)
};

// From the request's raw `kv_transfer_params` JSON object (empty = absent). Never fails:
// a malformed remote_prefill is reported in `problem` and the prompt is computed here.
RequestKvTransfer ParseRequestKvTransfer(const std::string& json);

// The response's `kv_transfer_params` object for a parked producer request.
std::string KvTransferParamsJson(const KvTransferParams& params);

}  // namespace tandem::server
