#include "kv_connector/multi_connector.h"

#include <algorithm>

#include "engine/request.h"

namespace tandem {

MultiConnector::MultiConnector(std::vector<std::unique_ptr<KvConnector>> connectors)
    : connectors_(std::move(connectors)) {}

Status MultiConnector::Start() {
  for (auto& c : connectors_) TANDEM_RETURN_IF_ERROR(c->Start());
  return Status::Ok();
}

void MultiConnector::Stop() {
  for (auto& c : connectors_) c->Stop();
}

void MultiConnector::AcceptRequest(KvTransferRequest* kv_transfer, int n_prompt) const {
  // A field is kept only if every connector keeps it; those that do not use PD keep both.
  for (const auto& c : connectors_) c->AcceptRequest(kv_transfer, n_prompt);
}

int MultiConnector::GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) {
  for (auto& c : connectors_) {
    const int n = c->GetNumNewMatchedTokens(r, num_computed_tokens);
    if (n > 0) {
      matched_[r.id] = c.get();
      return n;
    }
  }
  return 0;
}

void MultiConnector::UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int num_external_tokens) {
  auto it = matched_.find(r.id);
  if (it == matched_.end()) return;
  it->second->UpdateStateAfterAlloc(r, num_computed_tokens, num_external_tokens);
}

KvFinishAction MultiConnector::RequestFinished(const Request& r, std::string_view reason) {
  matched_.erase(r.id);
  KvFinishAction action;
  for (auto& c : connectors_) {
    KvFinishAction a = c->RequestFinished(r, reason);
    if (a.keep_blocks) action.keep_blocks = true;
    if (a.kv_transfer_params && !action.kv_transfer_params) action.kv_transfer_params = std::move(a.kv_transfer_params);
  }
  return action;
}

void MultiConnector::StartLoadKv() {
  for (auto& c : connectors_) c->StartLoadKv();
}

void MultiConnector::SaveKv(const Request& r) {
  for (auto& c : connectors_) c->SaveKv(r);
}

void MultiConnector::GetFinished(bool stopping, std::vector<KvLoadResult>* loads, std::vector<std::string>* freeable) {
  const size_t first = loads->size();
  for (auto& c : connectors_) c->GetFinished(stopping, loads, freeable);
  for (size_t i = first; i < loads->size(); ++i) matched_.erase((*loads)[i].request_id);
}

void MultiConnector::CancelLoad(const std::string& request_id) {
  if (auto it = matched_.find(request_id); it != matched_.end()) it->second->CancelLoad(request_id);
}

std::optional<std::chrono::steady_clock::time_point> MultiConnector::NextDeadline() const {
  std::optional<std::chrono::steady_clock::time_point> earliest;
  for (const auto& c : connectors_) {
    if (auto d = c->NextDeadline(); d && (!earliest || *d < *earliest)) earliest = d;
  }
  return earliest;
}

bool MultiConnector::ReleaseKvBlocks(const std::string& remote_request_id) {
  bool released = false;
  for (auto& c : connectors_) released = c->ReleaseKvBlocks(remote_request_id) || released;
  return released;
}

int MultiConnector::kv_transfer_port() const {
  for (const auto& c : connectors_) {
    if (int port = c->kv_transfer_port(); port != 0) return port;
  }
  return 0;
}

int MultiConnector::num_kept() const {
  int n = 0;
  for (const auto& c : connectors_) n += c->num_kept();
  return n;
}

}  // namespace tandem
