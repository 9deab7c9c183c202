#include "pool/pool_worker.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/logging.h"
#include "etcd/http_etcd_client.h"
#include "pool/worker_impl.h"

namespace tandem::pool {

Status ValidateWorkerConfig(const WorkerConfig& c) {
  auto addr = ParseHostPort(c.worker_address);
  if (!addr.ok()) return InvalidArgumentError("--worker_address: " + addr.status().message());
  if (c.etcd_address.empty()) return InvalidArgumentError("--etcd_address is required");
  if (c.shared_memory_mb == 0) return InvalidArgumentError("--shared_memory_size_mb must be > 0");
  if (c.shared_memory_mb > (64ull << 20))
    return InvalidArgumentError("--shared_memory_size_mb is too large");
  if (c.node_timeout_s < 2) return InvalidArgumentError("--node_timeout_s must be >= 2");
  if (c.node_dead_timeout_s < c.node_timeout_s) {
    return InvalidArgumentError("--node_dead_timeout_s must be >= --node_timeout_s");
  }
  if (c.metrics_port < -1 || c.metrics_port > 65535)
    return InvalidArgumentError("--metrics_port out of range");
  if (c.auth_token.size() > 4096) return InvalidArgumentError("--auth_token is too long");
  if (!(c.eviction_high_watermark_ratio > 0 && c.eviction_high_watermark_ratio <= 1))
    return InvalidArgumentError("--eviction_high_watermark_ratio must be in (0, 1]");
  if (!(c.eviction_ratio > 0 && c.eviction_ratio < c.eviction_high_watermark_ratio))
    return InvalidArgumentError("--eviction_ratio must be in (0, --eviction_high_watermark_ratio)");
  if (c.default_kv_lease_ttl_ms < 0 || c.default_kv_lease_ttl_ms > 3600 * 1000)
    return InvalidArgumentError("--default_kv_lease_ttl must be 0..3600000 ms");
  if (c.default_kv_soft_pin_ttl_ms < 1)
    return InvalidArgumentError("--default_kv_soft_pin_ttl must be >= 1 ms");
  if (c.spill_directory.empty()) {
    if (c.spill_size_limit != 0)
      return InvalidArgumentError("--spill_size_limit needs --spill_directory");
  } else {
    if (Status dir = CheckSpillDirectory(c.spill_directory); !dir.ok())
      return InvalidArgumentError("--spill_directory: " + dir.message());
    if (c.spill_size_limit != 0 && c.spill_size_limit < kMinSpillSizeLimit) {
      return InvalidArgumentError("--spill_size_limit: " + std::to_string(c.spill_size_limit) +
                                  " bytes is below one object (minimum " +
                                  std::to_string(kMinSpillSizeLimit) + "; 0 = 95% of free space)");
    }
  }
  return Status::Ok();
}

WorkerMetrics::WorkerMetrics(MetricsRegistry* r)
    : objects(r->GetGauge("tandem_pool_objects", "Sealed objects in the arena")),
      bytes(
          r->GetGauge("tandem_pool_bytes", "Arena bytes in use (objects being written included)")),
      capacity(r->GetGauge("tandem_pool_capacity_bytes", "Arena size in bytes")),
      hits_local(
          r->GetCounter("tandem_pool_hits", "Gets answered from this arena", {{"tier", "local"}})),
      hits_remote(
          r->GetCounter("tandem_pool_hits", "Gets answered from this arena", {{"tier", "remote"}})),
      misses(r->GetCounter("tandem_pool_misses", "Gets of keys found nowhere (or unreachable)")),
      puts(r->GetCounter("tandem_pool_puts", "Objects sealed by local clients")),
      evictions(r->GetCounter("tandem_pool_evictions", "Objects evicted by the LRU watermark")),
      remote_gets(r->GetCounter("tandem_pool_remote_gets", "Objects fetched from other workers")),
      remote_get_failures(
          r->GetCounter("tandem_pool_remote_get_failures",
                        "Fetches from other workers that failed (counted as misses)")),
      etcd_up(r->GetGauge("tandem_pool_etcd_up", "1 when the last etcd call succeeded")),
      ring_workers(r->GetGauge("tandem_pool_ring_workers", "Workers in the consistent-hash ring")),
      connections(r->GetGauge("tandem_pool_connections", "Open client and peer connections")),
      pinned(r->GetGauge("tandem_pool_pinned_objects",
                         "Objects pinned by a reader (never evicted meanwhile)")),
      soft_pinned(r->GetGauge("tandem_pool_soft_pinned_objects",
                              "Objects soft-pinned by an engine (evicted last)")),
      hits_disk(
          r->GetCounter("tandem_pool_hits", "Gets answered from this arena", {{"tier", "disk"}})),
      spill_queue_bytes(r->GetGauge("tandem_pool_spill_queue_bytes",
                                    "Evicted bytes waiting for the disk writer")),
      spills(r->GetCounter("tandem_pool_spills", "Evicted objects written to the disk tier")),
      spill_drops(r->GetCounter("tandem_pool_spill_drops",
                                "Evicted objects not written (queue full, no room, disk error)")),
      promotions(r->GetCounter("tandem_pool_promotions",
                               "Objects read from the disk tier back into the arena")),
      disk_evictions(r->GetCounter("tandem_pool_disk_evictions",
                                   "Files evicted by the disk tier's LRU watermark")),
      disk_corrupt(r->GetCounter("tandem_pool_disk_corrupt",
                                 "Spill files dropped for a bad header, length or checksum")),
      disk_write_bytes(
          r->GetCounter("tandem_pool_disk_write_bytes", "Bytes written to spill files")),
      disk_read_bytes(r->GetCounter("tandem_pool_disk_read_bytes", "Bytes read from spill files")) {
  const char* names[2] = {"memory", "disk"};
  for (int t = 0; t < 2; ++t) {
    MetricLabels l{{"tier", names[t]}};
    tier_objects[t] = r->GetGauge("tandem_pool_tier_objects", "Objects held in the tier", l);
    tier_bytes[t] = r->GetGauge("tandem_pool_tier_bytes", "Bytes held in the tier", l);
    tier_capacity[t] = r->GetGauge("tandem_pool_tier_capacity_bytes", "Size limit of the tier", l);
    tier_hits[t] = r->GetCounter("tandem_pool_tier_hits", "Gets of keys found in the tier", l);
    tier_misses[t] = r->GetCounter("tandem_pool_tier_misses",
                                   "Gets of keys looked up in the tier and not found there", l);
  }
}

PoolWorker::PoolWorker(WorkerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
PoolWorker::~PoolWorker() { Stop(); }
Status PoolWorker::Start() { return impl_->Start(); }
void PoolWorker::Stop() { impl_->Stop(); }
uint16_t PoolWorker::metrics_port() const { return impl_->metrics_port(); }

PoolWorker::Impl::Impl(WorkerConfig config)
    : config_(std::move(config)), self_(config_.worker_address) {}

PoolWorker::Impl::~Impl() {
  Stop();
  disk_.reset();  // writes what is queued; its callback still needs the fields below
}

Status PoolWorker::Impl::Start() {
  TANDEM_RETURN_IF_ERROR(ValidateWorkerConfig(config_));
  TANDEM_ASSIGN_OR_RETURN(HostPort addr, ParseHostPort(config_.worker_address));
  metrics_ = std::make_unique<WorkerMetrics>(&registry_);

  TANDEM_ASSIGN_OR_RETURN(
      arena_, ShmArena::Create(config_.shared_memory_mb << 20, config_.enable_huge_tlb));
  table_ =
      std::make_unique<ObjectTable>(arena_->size_bytes(), config_.eviction_high_watermark_ratio,
                                    config_.eviction_high_watermark_ratio - config_.eviction_ratio,
                                    std::chrono::milliseconds(config_.default_kv_lease_ttl_ms));
  if (!config_.spill_directory.empty()) {
    DiskTierOptions d;
    d.directory = config_.spill_directory;
    d.size_limit_bytes = config_.spill_size_limit;
    // Keys gone from the disk tier leave the directory unless the arena holds them again.
    d.on_dropped = [this](const std::vector<std::string>& keys) {
      std::vector<std::string> gone;
      for (const auto& k : keys) {
        if (!table_->Exists(k)) gone.push_back(k);
      }
      QueueDirOps(false, gone);
    };
    auto disk = DiskTier::Open(std::move(d));
    if (!disk.ok()) return disk.status().WithContext("--spill_directory");
    disk_ = std::move(disk).value();
    table_->SetSpillHook([this](const std::string& key, uint64_t offset, uint64_t size) {
      return disk_->Spill(key, arena_->base() + offset, size);
    });
  }
  TANDEM_LOG(INFO) << "arena: " << (arena_->size_bytes() >> 20) << " MiB"
                   << (arena_->huge_pages() ? " (huge pages)" : "");

  TANDEM_ASSIGN_OR_RETURN(tcp_listener_,
                          net::SocketListener::ListenTcp(addr.host, addr.port, {.backlog = 256}));
  // The peer-credential check of this socket is made at HELLO (worker_session.cc), so
  // that a refused client is told why.
  TANDEM_ASSIGN_OR_RETURN(unix_listener_,
                          net::SocketListener::ListenUnix(UnixSocketName(self_), {.backlog = 256}));

  if (config_.metrics_port != 0) {
    net::HttpServerOptions http;
    http.host = addr.host;
    http.port = config_.metrics_port < 0 ? static_cast<uint16_t>(addr.port + 1)
                                         : static_cast<uint16_t>(config_.metrics_port);
    metrics_server_ = std::make_unique<net::HttpServer>(http);
    metrics_server_->Route("GET", "/metrics",
                           [this](net::HttpRequest, std::shared_ptr<net::HttpResponseWriter> w) {
                             UpdateGauges();
                             w->SendResponse(200, {{"Content-Type", "text/plain; version=0.0.4"}},
                                             registry_.RenderPrometheus());
                           });
    metrics_server_->Route("GET", "/health",
                           [](net::HttpRequest, std::shared_ptr<net::HttpResponseWriter> w) {
                             w->SendResponse(200, {}, "{\"status\":\"ok\"}");
                           });
    Status s = metrics_server_->Start();
    if (!s.ok()) return s.WithContext("metrics port " + std::to_string(http.port));
  }

  peers_ = std::make_unique<PeerClient>(PeerClientOptions{config_.auth_token});
  TANDEM_ASSIGN_OR_RETURN(auto etcd, etcd::HttpEtcdClient::Create({config_.etcd_address}));
  etcd_ = std::move(etcd);
  MembershipOptions mo;
  mo.self_address = self_;
  mo.node_timeout_s = config_.node_timeout_s;
  mo.node_dead_timeout_s = config_.node_dead_timeout_s;
  mo.capacity_bytes = arena_->size_bytes();
  membership_ = std::make_unique<Membership>(
      etcd_.get(), mo,
      [this](std::shared_ptr<const HashRing> ring) { OnRingChange(std::move(ring)); });
  Status s = membership_->Start(config_.etcd_start_timeout);
  if (!s.ok()) {
    if (metrics_server_) metrics_server_->Stop();
    return s.WithContext("etcd " + config_.etcd_address);
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    started_ = true;
  }
  threads_.emplace_back([this] { AcceptLoop(*tcp_listener_); });
  threads_.emplace_back([this] { AcceptLoop(*unix_listener_); });
  threads_.emplace_back([this] { PublisherLoop(); });
  threads_.emplace_back([this] { LivenessLoop(); });
  WriteLiveness();
  TANDEM_LOG(INFO) << "pool worker " << self_ << " serving (clients: unix @"
                   << UnixSocketName(self_) << ", metrics port " << metrics_port() << ")";
  return Status::Ok();
}

void PoolWorker::Impl::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  TANDEM_LOG(INFO) << "pool worker " << self_ << " stopping";
  cv_.notify_all();
  tcp_listener_->Shutdown();
  unix_listener_->Shutdown();
  membership_->Stop(/*revoke=*/true);
  for (auto& t : threads_) t.join();
  threads_.clear();
  ReapConnections(/*all=*/true);
  if (metrics_server_) metrics_server_->Stop();
  disk_.reset();  // writes what is queued (a restart on the same directory serves it)
  TANDEM_LOG(INFO) << "pool worker " << self_ << " stopped";
}

void PoolWorker::Impl::AcceptLoop(net::SocketListener& listener) {
  const bool is_unix = listener.is_unix();
  while (true) {
    // Wakes at least once a second to reap finished connections.
    StatusOr<UniqueFd> fd = listener.Accept(std::chrono::seconds(1));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    ReapConnections(false);
    if (!fd.ok()) {
      if (fd.status().code() == StatusCode::kCancelled) return;
      if (fd.status().code() == StatusCode::kResourceExhausted) usleep(10000);  // out of fds
      continue;
    }
    std::lock_guard<std::mutex> lock(conn_mu_);
    if (connections_.size() >= config_.max_connections) {
      TANDEM_LOG(WARNING) << "connection limit " << config_.max_connections << " reached; refusing";
      continue;  // fd closes here
    }
    auto conn = std::make_unique<Connection>();
    conn->conn = std::make_unique<net::SocketConnection>(std::move(fd).value());
    Connection* c = conn.get();
    c->thread = std::thread([this, c, is_unix] {
      ServeConnection(*c->conn, is_unix);
      c->done = true;
    });
    connections_.push_back(std::move(conn));
    metrics_->connections->Set(static_cast<double>(connections_.size()));
  }
}

void PoolWorker::Impl::ReapConnections(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(conn_mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all || (*it)->done) {
        if (all) (*it)->conn->Shutdown();  // wakes a blocked recv
        finished.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    metrics_->connections->Set(static_cast<double>(connections_.size()));
  }
  for (auto& c : finished) c->thread.join();
}

void PoolWorker::Impl::QueueDirOps(bool put, const std::vector<std::string>& keys) {
  if (keys.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& k : keys) dir_ops_.push_back({put, k});
  cv_.notify_all();
}

void PoolWorker::Impl::OnRingChange(std::shared_ptr<const HashRing> ring) {
  std::string members;
  for (const auto& m : ring->members()) {
    members += (members.empty() ? "" : ", ") + m;
    peers_->Reset(m);
  }
  TANDEM_LOG(INFO) << "ring: [" << members << "]; re-announcing local keys";
  std::lock_guard<std::mutex> lock(mu_);
  republish_all_ = true;
  cv_.notify_all();
}

// Write-behind directory updates: batches DIR_PUT/DIR_DEL per ring owner, so a put
// never waits for the network. A failed batch is dropped (the data stays readable
// locally; a ring change re-announces everything).
void PoolWorker::Impl::PublisherLoop() {
  while (true) {
    std::deque<DirOp> ops;
    bool republish = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100),
                   [this] { return stopping_ || !dir_ops_.empty() || republish_all_; });
      if (stopping_) return;
      ops.swap(dir_ops_);
      republish = republish_all_;
      republish_all_ = false;
    }
    if (republish) {
      for (auto& k : table_->PrimaryKeys()) ops.push_back({true, std::move(k)});
      if (disk_) {
        for (auto& k : disk_->Keys()) ops.push_back({true, std::move(k)});
      }
    }
    if (ops.empty()) continue;
    auto ring = membership_->ring();
    std::map<std::pair<std::string, bool>, std::vector<std::string>> batches;  // (owner, put)
    for (auto& op : ops) batches[{ring->Owner(op.key), op.put}].push_back(std::move(op.key));
    for (auto& [target, keys] : batches) {
      const auto& [owner, put] = target;
      if (owner == self_) {
        put ? directory_.Put(self_, keys) : directory_.Del(self_, keys);
        continue;
      }
      if (!membership_->IsLive(owner)) continue;
      for (size_t i = 0; i < keys.size(); i += kMaxKeysPerFrame) {
        std::vector<std::string> chunk(keys.begin() + i,
                                       keys.begin() + std::min(keys.size(), i + kMaxKeysPerFrame));
        Status s = put ? peers_->DirPut(owner, self_, chunk) : peers_->DirDel(owner, self_, chunk);
        if (!s.ok()) {
          TANDEM_LOG(DEBUG) << "directory update to " << owner << ": " << s.ToString();
          break;
        }
      }
    }
  }
}

void PoolWorker::Impl::WriteLiveness() {
  if (config_.liveness_check_path.empty()) return;
  // Write a temp file and rename, so a reader never sees a half-written file.
  std::string tmp = config_.liveness_check_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) {
      TANDEM_LOG(WARNING) << "cannot write liveness file " << tmp;
      return;
    }
    out << "liveness check success\n";
  }
  std::rename(tmp.c_str(), config_.liveness_check_path.c_str());
}

void PoolWorker::Impl::LivenessLoop() {
  auto interval =
      std::chrono::seconds(std::max<int64_t>(1, std::min<int64_t>(10, config_.node_timeout_s / 3)));
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, interval, [this] { return stopping_; });
      if (stopping_) return;
    }
    WriteLiveness();
    UpdateGauges();
  }
}

void PoolWorker::Impl::UpdateGauges() {
  ObjectTableStats st = table_->stats();
  metrics_->objects->Set(static_cast<double>(st.objects));
  metrics_->bytes->Set(static_cast<double>(st.used_bytes));
  metrics_->capacity->Set(static_cast<double>(st.capacity_bytes));
  metrics_->pinned->Set(static_cast<double>(st.pinned));
  metrics_->soft_pinned->Set(static_cast<double>(st.soft_pinned));
  metrics_->tier_objects[kMemoryTier]->Set(static_cast<double>(st.objects));
  metrics_->tier_bytes[kMemoryTier]->Set(static_cast<double>(st.used_bytes));
  metrics_->tier_capacity[kMemoryTier]->Set(static_cast<double>(st.capacity_bytes));
  // Counters kept by the tiers themselves, brought up to date.
  auto sync = [](Counter* c, uint64_t total) {
    double d = static_cast<double>(total) - c->value();
    if (d > 0) c->Add(d);
  };
  if (disk_) {
    DiskTierStats d = disk_->stats();
    metrics_->tier_objects[kDiskTier]->Set(static_cast<double>(d.objects));
    metrics_->tier_bytes[kDiskTier]->Set(static_cast<double>(d.bytes));
    metrics_->tier_capacity[kDiskTier]->Set(static_cast<double>(d.capacity_bytes));
    metrics_->spill_queue_bytes->Set(static_cast<double>(d.queued_bytes));
    sync(metrics_->spills, d.spills);
    sync(metrics_->spill_drops, d.spill_drops);
    sync(metrics_->disk_evictions, d.evictions);
    sync(metrics_->disk_corrupt, d.corrupt);
    sync(metrics_->disk_write_bytes, d.bytes_written);
    sync(metrics_->disk_read_bytes, d.bytes_read);
  }
  double evicted = static_cast<double>(st.evictions) - metrics_->evictions->value();
  if (evicted > 0) metrics_->evictions->Add(evicted);
  metrics_->etcd_up->Set(membership_->etcd_up() ? 1 : 0);
  metrics_->ring_workers->Set(static_cast<double>(membership_->ring()->members().size()));
}

}  // namespace tandem::pool
