// MultiConnector: several KvConnectors as one (vLLM's MultiConnector; vLLM-Ascend's PD
// deployments run MooncakeConnector + AscendStoreConnector on one instance).
//
// Loads: the connectors are asked in order and the first that can load tokens for a
// request serves it (so a PD pull wins over a pool lookup); the request's load is
// reported by that connector alone. Saves, finishes and GetFinished go to every
// connector; a finished request's blocks are kept if any connector keeps them — at
// most one may (only the PD producer does).
//
// Thread safety: as KvConnector.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/kv_connector.h"

namespace tandem {

class MultiConnector final : public KvConnector {
 public:
  explicit MultiConnector(std::vector<std::unique_ptr<KvConnector>> connectors);

  Status Start() override;
  void Stop() override;
  void AcceptRequest(KvTransferRequest* kv_transfer, int n_prompt) const override;

  int GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) override;
  void UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int num_external_tokens) override;
  KvFinishAction RequestFinished(const Request& r, std::string_view reason) override;

  void StartLoadKv() override;
  void SaveKv(const Request& r) override;
  void GetFinished(bool stopping, std::vector<KvLoadResult>* loads, std::vector<std::string>* freeable) override;
  void CancelLoad(const std::string& request_id) override;

  std::optional<std::chrono::steady_clock::time_point> NextDeadline() const override;
  bool ReleaseKvBlocks(const std::string& remote_request_id) override;
  int kv_transfer_port() const override;
  int num_kept() const override;

 private:
  std::vector<std::unique_ptr<KvConnector>> connectors_;
  std::unordered_map<std::string, KvConnector*> matched_;  // engine thread: who loads a request
};

}  // namespace tandem
