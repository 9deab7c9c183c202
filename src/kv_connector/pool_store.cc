#include "kv_connector/pool_store.h"

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "pool/pool_client.h"

namespace tandem {
namespace {

// Slots of the "saved or loaded recently" table: 16 bytes each, allocated up front.
constexpr size_t kRememberSlots = size_t{1} << 16;
constexpr size_t kSaveBatch = 64;

}  // namespace

PoolStore::PoolStore(PoolStoreOptions options, std::string model_fingerprint, transfer::KvMemory arena)
    : options_(std::move(options)),
      prefix_(model_fingerprint + "@tp" + std::to_string(options_.tp_rank) + "@"),
      arena_(arena),
      remembered_(kRememberSlots) {
  saver_ = std::thread([this] { SaveLoop(); });
}

PoolStore::~PoolStore() {
  {
    std::lock_guard<std::mutex> lock(save_mu_);
    stopping_ = true;
    save_cv_.notify_all();
  }
  saver_.join();
}

std::string PoolStore::Key(const kv::BlockHash& hash) const { return prefix_ + hash.ToHex(); }

std::shared_ptr<pool::PoolClient> PoolStore::Client() {
  std::lock_guard<std::mutex> lock(client_mu_);
  if (client_) return client_;
  const auto now = std::chrono::steady_clock::now();
  if (now < retry_after_) return nullptr;
  pool::PoolClientOptions o;
  o.worker_address = options_.worker_address;
  o.connect_timeout = std::chrono::milliseconds(1000);
  o.request_timeout = options_.request_timeout;
  o.num_connections = 2;
  StatusOr<std::unique_ptr<pool::PoolClient>> c = pool::PoolClient::Connect(o);
  if (!c.ok()) {
    retry_after_ = now + options_.backoff;
    TANDEM_LOG(WARNING) << "KV pool worker unreachable (" << c.status().message() << "); computing without it for "
                        << options_.backoff.count() << " ms";
    return nullptr;
  }
  client_ = std::shared_ptr<pool::PoolClient>(std::move(*c));
  TANDEM_LOG(INFO) << "KV pool: connected to the worker at " << client_->worker_address();
  return client_;
}

void PoolStore::Failed(const Status& status) {
  stats_.failures.fetch_add(1);
  {
    // The worker may have restarted empty: what we saved before may be gone.
    std::lock_guard<std::mutex> lock(remember_mu_);
    std::fill(remembered_.begin(), remembered_.end(), kv::BlockHash{});
  }
  std::lock_guard<std::mutex> lock(client_mu_);
  // Drop the client (calls in flight keep their reference) and give the worker a break.
  retry_after_ = std::chrono::steady_clock::now() + options_.backoff;
  TANDEM_LOG(WARNING) << "KV pool call failed (" << status.message() << "); pausing pool use for "
                      << options_.backoff.count() << " ms";
  client_.reset();
}

int PoolStore::Lookup(const std::vector<kv::BlockHash>& hashes) {
  if (hashes.empty()) return 0;
  std::shared_ptr<pool::PoolClient> client = Client();
  if (client == nullptr) return 0;
  std::vector<std::string> keys;
  keys.reserve(hashes.size());
  for (const kv::BlockHash& h : hashes) keys.push_back(Key(h));
  StatusOr<size_t> n = client->ExistPrefix(keys);
  if (!n.ok()) {
    Failed(n.status());
    return 0;
  }
  return static_cast<int>(std::min(*n, hashes.size()));
}

PoolLoadResult PoolStore::Load(const std::vector<kv::BlockHash>& hashes, const std::vector<int32_t>& blocks) {
  PoolLoadResult result;
  if (hashes.empty() || hashes.size() != blocks.size()) return result;
  std::shared_ptr<pool::PoolClient> client = Client();
  if (client == nullptr) return result;
  std::vector<std::string> keys;
  keys.reserve(hashes.size());
  for (const kv::BlockHash& h : hashes) keys.push_back(Key(h));
  StatusOr<std::unique_ptr<pool::PinnedObjects>> got = client->Get(keys);
  if (!got.ok()) {
    Failed(got.status());
    return result;
  }
  const pool::PinnedObjects& objects = **got;
  const uint64_t k = arena_.k_block_bytes;
  const uint64_t v = arena_.v_block_bytes;
  for (size_t i = 0; i < objects.size(); ++i) {
    if (!objects.found(i)) break;
    std::span<const uint8_t> data = objects.data(i);
    if (data.size() != k + v) {
      TANDEM_LOG(WARNING) << "KV pool object " << keys[i] << " has " << data.size() << " bytes, expected " << k + v
                          << "; ignoring it";
      break;
    }
    std::memcpy(arena_.BlockK(blocks[i]), data.data(), k);
    std::memcpy(arena_.BlockV(blocks[i]), data.data() + k, v);
    ++result.blocks_loaded;
    if (objects.source(i) == pool::ObjectSource::kRemote) ++result.blocks_remote;
    if (objects.source(i) == pool::ObjectSource::kDisk) ++result.blocks_disk;
    Remember(hashes[i]);
  }
  stats_.loaded_local.fetch_add(
      static_cast<uint64_t>(result.blocks_loaded - result.blocks_remote - result.blocks_disk));
  stats_.loaded_disk.fetch_add(static_cast<uint64_t>(result.blocks_disk));
  if (options_.soft_pin_ttl.count() > 0 && result.blocks_loaded > 0) {
    // Still pinned by `objects`: all of them are in the local arena to be soft-pinned.
    keys.resize(static_cast<size_t>(result.blocks_loaded));
    auto pinned = client->SoftPin(keys, static_cast<uint32_t>(options_.soft_pin_ttl.count()));
    if (pinned.ok()) {
      for (bool b : *pinned) stats_.soft_pinned.fetch_add(b ? 1 : 0);
    } else {
      TANDEM_LOG(DEBUG) << "KV pool soft pin: " << pinned.status().ToString();
    }
  }
  stats_.loaded_remote.fetch_add(static_cast<uint64_t>(result.blocks_remote));
  return result;
}

bool PoolStore::Remember(const kv::BlockHash& hash) {
  // Direct-mapped: a hash takes the slot its low bits name, replacing whatever was there.
  // Forgetting early only costs a redundant put (the worker answers "exists").
  std::lock_guard<std::mutex> lock(remember_mu_);
  kv::BlockHash& slot = remembered_[hash.low & (kRememberSlots - 1)];
  if (slot == hash) return true;
  slot = hash;
  return false;
}

void PoolStore::Save(const kv::BlockHash& hash, int32_t block) {
  if (Remember(hash)) return;
  const uint64_t k = arena_.k_block_bytes;
  const uint64_t v = arena_.v_block_bytes;
  std::lock_guard<std::mutex> lock(save_mu_);
  if (pending_bytes_ + k + v > options_.max_pending_save_bytes) {
    stats_.dropped_saves.fetch_add(1);
    if (observer_) observer_(0, 0, 1);
    return;
  }
  PendingSave s;
  s.key = Key(hash);
  s.size = k + v;
  s.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (s.size + 63) / 64 * 64)));
  if (!s.bytes) {
    stats_.dropped_saves.fetch_add(1);
    if (observer_) observer_(0, 0, 1);
    return;
  }
  std::memcpy(s.bytes.get(), arena_.BlockK(block), k);
  std::memcpy(s.bytes.get() + k, arena_.BlockV(block), v);
  pending_bytes_ += k + v;
  pending_.push_back(std::move(s));
  save_cv_.notify_one();
}

void PoolStore::Flush() {
  std::unique_lock<std::mutex> lock(save_mu_);
  save_cv_.wait(lock, [&] { return pending_.empty() && !saving_; });
}

void PoolStore::SaveLoop() {
  while (true) {
    std::vector<PendingSave> batch;
    {
      std::unique_lock<std::mutex> lock(save_mu_);
      save_cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (stopping_) return;
      while (!pending_.empty() && batch.size() < kSaveBatch) {
        pending_bytes_ -= pending_.front().size;
        batch.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      saving_ = true;
    }
    uint64_t stored = 0;
    uint64_t existing = 0;
    uint64_t dropped = 0;
    std::shared_ptr<pool::PoolClient> client = Client();
    if (client == nullptr) {
      dropped = batch.size();
    } else {
      std::vector<std::string> keys;
      std::vector<std::span<const uint8_t>> values;
      for (const PendingSave& s : batch) {
        keys.push_back(s.key);
        values.emplace_back(s.bytes.get(), s.size);
      }
      StatusOr<std::vector<pool::PutOutcome>> out = client->Put(keys, values);
      if (!out.ok()) {
        dropped = batch.size();
        Failed(out.status());
      } else {
        for (pool::PutOutcome o : *out) {
          if (o == pool::PutOutcome::kStored) ++stored;
          else if (o == pool::PutOutcome::kExists) ++existing;
          else ++dropped;
        }
      }
    }
    stats_.saved_blocks.fetch_add(stored);
    stats_.skipped_existing.fetch_add(existing);
    stats_.dropped_saves.fetch_add(dropped);
    if (observer_) observer_(stored, existing, dropped);
    std::lock_guard<std::mutex> lock(save_mu_);
    saving_ = false;
    save_cv_.notify_all();
  }
}

}  // namespace tandem
