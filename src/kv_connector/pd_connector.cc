#include "kv_connector/pd_connector.h"

#include "common/logging.h"
#include "engine/engine_metrics.h"
#include "engine/request.h"
#include "kv/kv_cache_manager.h"
#include "transfer/lease_table.h"
#include "transfer/transfer_server.h"
#include "transfer/transport.h"

namespace tandem {
namespace {

constexpr int kPullWorkers = 2;

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace

PdConnector::PdConnector(KvConnectorContext context)
    : context_(std::move(context)),
      options_(context_.options->kv_transfer),
      block_size_(context_.options->block_size) {}

PdConnector::~PdConnector() { Stop(); }

Status PdConnector::Start() {
  if (options_.producer) {
    leases_ = std::make_unique<transfer::LeaseTable>(Ms(options_.lease_s), Ms(options_.lease_cap_s), context_.wake);
    transfer::TransferServerOptions so;
    so.bind_host = options_.bind_host;
    so.port = options_.port;
    so.enable_unix_socket = options_.same_host_shm;
    so.auth_token = options_.auth_token;
    server_ = std::make_unique<transfer::TransferServer>(so, context_.memory, leases_.get(), context_.model_fingerprint);
    TANDEM_RETURN_IF_ERROR(server_->Start());
  }
  if (options_.consumer) {
    transport_ = std::make_unique<transfer::SocketTransport>();
    client_ = std::make_unique<transfer::TransferClient>(transport_.get(), context_.memory, context_.model_fingerprint,
                                                         options_.same_host_shm, options_.auth_token);
    for (int i = 0; i < kPullWorkers; ++i) workers_.emplace_back([this] { PullWorker(); });
  }
  return Status::Ok();
}

void PdConnector::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  for (std::thread& w : workers_) w.join();
  workers_.clear();
  if (server_) server_->Stop();
}

void PdConnector::AcceptRequest(KvTransferRequest* kv_transfer, int n_prompt) const {
  if (!options_.producer) kv_transfer->do_remote_decode = false;
  if (!kv_transfer->remote_prefill) return;
  const KvTransferParams& p = *kv_transfer->remote_prefill;
  std::string why;
  if (!options_.consumer) {
    why = "this instance is not a KV consumer (--kv-transfer-config kv_role)";
  } else if (p.remote_block_size != block_size_) {
    why = "remote_block_size " + std::to_string(p.remote_block_size) + " differs from --block-size " +
          std::to_string(block_size_);
  } else if (p.num_prompt_blocks != (n_prompt + block_size_ - 1) / block_size_ ||
             static_cast<int>(p.remote_block_ids.size()) != p.num_prompt_blocks) {
    why = "the producer's " + std::to_string(p.remote_block_ids.size()) + " blocks do not cover this prompt of " +
          std::to_string(n_prompt) + " tokens";
  } else if (p.remote_host.empty() || p.remote_port <= 0 || p.remote_port > 65535 || p.remote_request_id.empty()) {
    why = "remote_host/remote_port/remote_request_id missing";
  }
  if (why.empty()) return;
  TANDEM_LOG(WARNING) << "computing the prompt locally instead of pulling it: " << why;
  kv_transfer->remote_prefill.reset();
}

// ---- Consumer ----

int PdConnector::GetNumNewMatchedTokens(const Request& r, int num_computed_tokens) {
  if (!r.kv_transfer.remote_prefill || !client_ || pulled_.count(r.id)) return 0;
  return std::max(0, r.prompt_len - num_computed_tokens);
}

void PdConnector::UpdateStateAfterAlloc(const Request& r, int num_computed_tokens, int) {
  const KvTransferParams& p = *r.kv_transfer.remote_prefill;
  pulled_.insert(r.id);
  const std::vector<int32_t>& table = context_.kv->GetBlockTable(r.id);
  const int first = num_computed_tokens / block_size_;  // after the local prefix hit
  PullJob job;
  job.request_id = r.id;
  job.spec.host = p.remote_host;
  job.spec.port = p.remote_port;
  job.spec.remote_request_id = p.remote_request_id;
  job.spec.remote_block_ids.assign(p.remote_block_ids.begin() + first, p.remote_block_ids.end());
  job.spec.local_block_ids.assign(table.begin() + first, table.begin() + p.num_prompt_blocks);
  job.cancel = std::make_shared<std::atomic<bool>>(false);
  pulls_[r.id] = Pull{p, num_computed_tokens, r.prompt_len};
  to_start_.push_back(std::move(job));
}

void PdConnector::StartLoadKv() {
  for (PullJob& job : to_start_) Enqueue(std::move(job));
  to_start_.clear();
}

void PdConnector::Enqueue(PullJob job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!job.request_id.empty()) cancels_[job.request_id] = job.cancel;
  queue_.push_back(std::move(job));
  cv_.notify_one();
}

void PdConnector::EnqueueRelease(const KvTransferParams& remote) {
  PullJob job;
  job.spec.host = remote.remote_host;
  job.spec.port = remote.remote_port;
  job.spec.remote_request_id = remote.remote_request_id;
  job.cancel = std::make_shared<std::atomic<bool>>(false);
  Enqueue(std::move(job));
}

void PdConnector::CancelLoad(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = cancels_.find(request_id); it != cancels_.end()) it->second->store(true);
}

void PdConnector::PullWorker() {
  while (true) {
    PullJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and every queued release was sent
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (job.spec.remote_block_ids.empty()) {  // release only
      Status s = client_->Release(job.spec.host, job.spec.port, job.spec.remote_request_id);
      if (!s.ok()) TANDEM_LOG(INFO) << "kv transfer: releasing " << job.spec.remote_request_id << ": " << s.message();
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<transfer::PullResult> result =
        job.cancel->load() ? StatusOr<transfer::PullResult>(CancelledError("kv transfer: cancelled"))
                           : client_->Pull(job.spec, job.cancel.get());
    PullDone done;
    done.request_id = job.request_id;
    done.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (result.ok()) {
      done.result = *result;
    } else {
      done.status = result.status();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancels_.erase(job.request_id);
      done_.push_back(std::move(done));
    }
    context_.wake();
  }
}

KvLoadResult PdConnector::OnPullDone(const PullDone& done) {
  auto it = pulls_.find(done.request_id);
  const Pull pull = it->second;
  pulls_.erase(it);
  context_.metrics->OnKvPull(done.status.ok(), done.result.bytes, done.seconds, done.result.used_shm);
  KvLoadResult out;
  out.request_id = done.request_id;
  if (!done.status.ok()) {
    TANDEM_LOG(WARNING) << "request " << done.request_id << ": pulling " << pull.remote.num_prompt_blocks
                        << " KV blocks from " << pull.remote.remote_host << ":" << pull.remote.remote_port
                        << " failed: " << done.status.message()
                        << (options_.recompute_on_failure ? "; recomputing the prompt" : "; failing the request");
    EnqueueRelease(pull.remote);
    out.num_loaded_tokens = pull.num_local_tokens;  // the local prefix hit stays valid
    if (!options_.recompute_on_failure) {
      out.error = UnavailableError("loading the prompt's KV cache from the prefill instance failed: " +
                                   done.status.message());
    }
    return out;
  }
  TANDEM_LOG(INFO) << "request " << done.request_id << ": pulled " << done.result.bytes << " bytes of KV in "
                   << static_cast<int>(done.seconds * 1000) << " ms" << (done.result.used_shm ? " (shared memory)" : "");
  out.num_loaded_tokens = pull.n_prompt;
  out.first_token = pull.remote.last_token_id;
  return out;
}

// ---- Producer ----

std::optional<KvTransferParams> PdConnector::Keep(const Request& r) {
  const std::vector<int32_t>& table = context_.kv->GetBlockTable(r.id);
  const int n_blocks = (r.prompt_len + block_size_ - 1) / block_size_;
  if (static_cast<int>(table.size()) < n_blocks || r.num_output_tokens() < 1) return std::nullopt;
  KvTransferParams p;
  p.remote_engine_id = options_.engine_id;
  p.remote_request_id = r.id;
  p.remote_host = options_.advertise_host;
  p.remote_port = server_->port();
  p.remote_block_ids.assign(table.begin(), table.begin() + n_blocks);
  p.remote_block_size = block_size_;
  p.num_prompt_blocks = n_blocks;
  p.last_token_id = r.tokens[r.prompt_len];
  if (!leases_->Keep(r.id, p.remote_block_ids).ok()) return std::nullopt;
  ++num_kept_;
  context_.metrics->SetKvLeases(leases_->size());
  return p;
}

KvFinishAction PdConnector::RequestFinished(const Request& r, std::string_view reason) {
  pulled_.erase(r.id);
  KvFinishAction action;
  if (r.kv_transfer.do_remote_decode && leases_ && (reason == "stop" || reason == "length")) {
    action.kv_transfer_params = Keep(r);
    action.keep_blocks = action.kv_transfer_params.has_value();
  }
  return action;
}

void PdConnector::GetFinished(bool stopping, std::vector<KvLoadResult>* loads, std::vector<std::string>* freeable) {
  std::vector<PullDone> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(done_);
  }
  for (const PullDone& d : done) loads->push_back(OnPullDone(d));
  if (!leases_) return;
  const auto now = stopping ? transfer::LeaseTable::Clock::time_point::max() : transfer::LeaseTable::Clock::now();
  std::vector<std::string> ids = leases_->TakeFreeable(now);
  if (ids.empty()) return;
  num_kept_ -= static_cast<int>(ids.size());
  context_.metrics->SetKvLeases(leases_->size());
  freeable->insert(freeable->end(), ids.begin(), ids.end());
}

std::optional<std::chrono::steady_clock::time_point> PdConnector::NextDeadline() const {
  return leases_ ? leases_->NextDeadline() : std::nullopt;
}

bool PdConnector::ReleaseKvBlocks(const std::string& remote_request_id) {
  return leases_ != nullptr && leases_->Release(remote_request_id);
}

int PdConnector::kv_transfer_port() const { return server_ ? server_->port() : 0; }

}  // namespace tandem
