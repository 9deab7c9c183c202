// ExpertParallelCoordinator: wraps an engine step of one rank of an expert-parallel
// group (--enable-expert-parallel over --data-parallel-size ranks) so that every rank
// makes the same collectives: each step every rank says whether it has a batch (one
// all-reduce); when any has, the idle ones run the dummy batch
// (Forward::RunExpertParallelIdle). When no rank has, the loop polls with a pause that
// grows from 1 ms to 20 ms while the group stays idle: a new request waits at most that
// long for the others, and an idle group costs ~50 all-reduces a second. A failed
// collective (a rank gone, a collective past its timeout) breaks the group: the engine
// ends every request with the group's error, /health reports it, and each step tries
// to re-form the group (ExpertExchange::TryResume), polled the same way.
//
// Thread safety: engine thread only, except error(), which any thread may call.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"

namespace tandem {

class EngineMetrics;
class ExpertExchange;
class ModelRunner;

class ExpertParallelCoordinator {
 public:
  // All borrowed; they outlive the coordinator. `exchange` is not null.
  ExpertParallelCoordinator(ExpertExchange* exchange, ModelRunner* runner, EngineMetrics* metrics);

  // The wait policy: how long the loop may sleep for work before it steps anyway
  // (nullopt: it steps at once, the group is busy). Grows while the group is idle or
  // broken.
  std::optional<std::chrono::milliseconds> NextPoll();

  // Before scheduling: a broken group that re-formed serves again.
  void BeforeStep();
  // After scheduling: the lockstep all-reduce (`has_batch`: this rank scheduled
  // something); an idle rank of a busy group runs the dummy batch. False when the group
  // is broken: the step must not run (the engine fails its requests).
  bool Lockstep(bool has_batch);
  // After the step's forward pass: false when a collective in it failed (its outputs
  // are not to be trusted).
  bool AfterForward();

  // The group's error (a broken group), recorded for /health; OK while it is live.
  Status status() const;
  // Any thread: the message of the error that broke the group, "" while it serves.
  std::string error() const;

 private:
  bool Live() const;
  void RecordError();

  static constexpr std::chrono::milliseconds kMaxPoll{20};
  ExpertExchange* exchange_;
  ModelRunner* runner_;
  EngineMetrics* metrics_;
  bool group_idle_ = true;  // no rank had a batch at the last step
  std::chrono::milliseconds poll_{1};
  mutable std::mutex mu_;
  std::string error_;  // guarded by mu_
};

}  // namespace tandem
