#include "engine/expert_parallel_coordinator.h"

#include <algorithm>

#include "common/logging.h"
#include "engine/engine_metrics.h"
#include "engine/model_runner.h"
#include "model/expert_exchange.h"

namespace tandem {

ExpertParallelCoordinator::ExpertParallelCoordinator(ExpertExchange* exchange, ModelRunner* runner,
                                                     EngineMetrics* metrics)
    : exchange_(exchange), runner_(runner), metrics_(metrics) {}

bool ExpertParallelCoordinator::Live() const { return exchange_->status().ok(); }

std::optional<std::chrono::milliseconds> ExpertParallelCoordinator::NextPoll() {
  if (group_idle_ || !Live()) {
    const std::chrono::milliseconds wait = poll_;
    poll_ = std::min(poll_ * 2, kMaxPoll);
    return wait;
  }
  poll_ = std::chrono::milliseconds(1);
  return std::nullopt;
}

void ExpertParallelCoordinator::BeforeStep() {
  if (Live() || !exchange_->TryResume()) return;
  TANDEM_LOG(INFO) << "expert-parallel group re-formed; serving again";
  std::lock_guard<std::mutex> lock(mu_);
  error_.clear();
  group_idle_ = true;
}

bool ExpertParallelCoordinator::Lockstep(bool has_batch) {
  if (Live()) {
    StatusOr<bool> any = exchange_->AnyRank(has_batch);
    group_idle_ = any.ok() && !*any;
    if (any.ok() && *any && !has_batch) {
      runner_->RunExpertParallelIdle();  // the other ranks' tokens still need our experts
      metrics_->OnExpertParallelStep(true, runner_->expert_exchange_seconds(), runner_->expert_exchange_bytes_sent());
    }
  }
  if (Live()) return true;
  RecordError();
  return false;
}

bool ExpertParallelCoordinator::AfterForward() {
  if (!Live()) {
    RecordError();
    return false;
  }
  metrics_->OnExpertParallelStep(false, runner_->expert_exchange_seconds(), runner_->expert_exchange_bytes_sent());
  return true;
}

void ExpertParallelCoordinator::RecordError() {
  std::lock_guard<std::mutex> lock(mu_);
  error_ = exchange_->status().message();
}

Status ExpertParallelCoordinator::status() const { return exchange_->status(); }

std::string ExpertParallelCoordinator::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

}  // namespace tandem
