#include "pool/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/logging.h"
#include "pool/wire.h"

namespace tandem::pool {
namespace {

// File layout (docs/POOL.md "Disk tier"), little-endian:
//   0 u32 magic, 4 u16 version, 6 u16 reserved, 8 u32 key_len, 12 u32 reserved,
//   16 u64 value_len, 24 u64 XXH64(key || value, seed 0), 32 key, 32 + key_len value.
constexpr uint32_t kFileMagic = 0x44564B54;  // "TKVD" in memory order
constexpr uint16_t kFileVersion = 1;
constexpr size_t kFileHeaderBytes = 32;
constexpr const char* kSuffix = ".kv";

struct FileHeader {
  uint32_t key_len = 0;
  uint64_t value_len = 0;
  uint64_t checksum = 0;
};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

void EncodeFileHeader(const FileHeader& h, uint8_t out[kFileHeaderBytes]) {
  std::memset(out, 0, kFileHeaderBytes);
  std::memcpy(out, &kFileMagic, 4);
  std::memcpy(out + 4, &kFileVersion, 2);
  std::memcpy(out + 8, &h.key_len, 4);
  std::memcpy(out + 16, &h.value_len, 8);
  std::memcpy(out + 24, &h.checksum, 8);
}

bool DecodeFileHeader(const uint8_t in[kFileHeaderBytes], FileHeader* h) {
  if (Load<uint32_t>(in) != kFileMagic || Load<uint16_t>(in + 4) != kFileVersion) return false;
  h->key_len = Load<uint32_t>(in + 8);
  h->value_len = Load<uint64_t>(in + 16);
  h->checksum = Load<uint64_t>(in + 24);
  return h->key_len >= 1 && h->key_len <= kMaxKeyBytes && h->value_len >= 1 &&
         h->value_len <= kMaxObjectBytes;
}

uint64_t Checksum(std::string_view key, const uint8_t* value, uint64_t size) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  XXH64_update(st, key.data(), key.size());
  XXH64_update(st, value, size);
  uint64_t sum = XXH64_digest(st);
  XXH64_freeState(st);
  return sum;
}

// Full pread/pwrite loops; false on error or a short file.
bool PreadAll(int fd, uint8_t* dst, uint64_t size, uint64_t offset) {
  while (size > 0) {
    ssize_t n = pread(fd, dst, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    dst += n;
    size -= static_cast<uint64_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const void* src, uint64_t size) {
  auto p = static_cast<const uint8_t*>(src);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<uint64_t>(n);
  }
  return true;
}

}  // namespace

Status CheckSpillDirectory(const std::string& directory) {
  struct stat st;
  if (stat(directory.c_str(), &st) != 0)
    return FailedPreconditionError(directory + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return FailedPreconditionError(directory + " is not a directory");
  if (access(directory.c_str(), W_OK | X_OK | R_OK) != 0)
    return FailedPreconditionError(directory + " is not writable: " + std::strerror(errno));
  return Status::Ok();
}

DiskTier::DiskTier(DiskTierOptions options) : options_(std::move(options)) {}

StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(DiskTierOptions options) {
  TANDEM_RETURN_IF_ERROR(CheckSpillDirectory(options.directory));
  if (options.size_limit_bytes == 0) {
    struct statvfs fs;
    if (statvfs(options.directory.c_str(), &fs) != 0)
      return FailedPreconditionError(options.directory + ": statvfs: " + std::strerror(errno));
    options.size_limit_bytes =
        static_cast<uint64_t>(static_cast<double>(fs.f_bavail) * fs.f_frsize * 0.95);
    if (options.size_limit_bytes == 0)
      return FailedPreconditionError(options.directory + " has no free space");
  }
  std::unique_ptr<DiskTier> tier(new DiskTier(std::move(options)));
  const double limit = static_cast<double>(tier->options_.size_limit_bytes);
  tier->high_bytes_ = static_cast<uint64_t>(limit * tier->options_.high_watermark);
  tier->low_bytes_ = static_cast<uint64_t>(limit * tier->options_.low_watermark);
  tier->stats_.capacity_bytes = tier->options_.size_limit_bytes;
  tier->Scan();
  tier->writer_ = std::thread([t = tier.get()] { t->WriterLoop(); });
  return tier;
}

DiskTier::~DiskTier() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A graceful stop keeps what was evicted: the restarted worker serves it.
    cv_.wait_for(lock, std::chrono::seconds(10), [this] { return queue_.empty(); });
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

std::string DiskTier::PathOf(uint64_t name_hash) const {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx%s", static_cast<unsigned long long>(name_hash),
                kSuffix);
  return options_.directory + "/" + name;
}

void DiskTier::Scan() {
  DIR* dir = opendir(options_.directory.c_str());
  if (dir == nullptr) return;
  struct Found {
    std::string key;
    uint64_t size;
    uint64_t name_hash;
    int64_t mtime_ns;
  };
  std::vector<Found> found;
  uint64_t bad = 0;
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    std::string path = options_.directory + "/" + name;
    if (name.size() == 16 + std::strlen(kSuffix) + 4 &&
        name.ends_with(std::string(kSuffix) + ".tmp")) {
      unlink(path.c_str());  // a write cut short by a crash
      continue;
    }
    if (name.size() != 16 + std::strlen(kSuffix) || name.substr(16) != kSuffix) continue;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    uint8_t head[kFileHeaderBytes];
    FileHeader h;
    std::string key;
    bool ok = fstat(fd, &st) == 0 && PreadAll(fd, head, kFileHeaderBytes, 0) &&
              DecodeFileHeader(head, &h) &&
              static_cast<uint64_t>(st.st_size) == kFileHeaderBytes + h.key_len + h.value_len;
    if (ok) {
      key.resize(h.key_len);
      ok = PreadAll(fd, reinterpret_cast<uint8_t*>(key.data()), h.key_len, kFileHeaderBytes);
    }
    close(fd);
    uint64_t name_hash = XXH3_64bits(key.data(), key.size());
    if (ok) ok = PathOf(name_hash) == path;  // a file renamed by hand is not ours
    if (!ok) {
      unlink(path.c_str());
      ++bad;
      continue;
    }
    found.push_back({std::move(key), h.value_len, name_hash,
                     static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
  }
  closedir(dir);
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& f : found) {
    Entry entry;
    entry.size = f.size;
    entry.name_hash = f.name_hash;
    entry.lru = lru_.insert(lru_.end(), f.key);
    by_hash_[f.name_hash] = f.key;
    stats_.bytes += f.size;
    index_.emplace(std::move(f.key), entry);
  }
  stats_.objects = index_.size();
  stats_.indexed_at_start = index_.size();
  stats_.corrupt += bad;
  TANDEM_LOG(INFO) << "disk tier " << options_.directory << ": " << index_.size() << " objects ("
                   << (stats_.bytes >> 20) << " MiB) re-indexed, " << bad
                   << " bad files dropped; limit " << (options_.size_limit_bytes >> 20) << " MiB";
  // Over the limit (it was lowered since): the writer's eviction trims it on the next write.
}

bool DiskTier::Spill(const std::string& key, const uint8_t* data, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);  // the same bytes are on disk already
    return true;
  }
  if (queued_.count(key) != 0) return true;
  if (size > high_bytes_ || queued_bytes_ + size > options_.max_queued_bytes) {
    NoteDrop(size > high_bytes_ ? "object larger than the spill size limit" : "spill queue full");
    return false;
  }
  queue_.push_back({key, std::string(reinterpret_cast<const char*>(data), size)});
  queued_[key] = &queue_.back();
  queued_bytes_ += size;
  cv_.notify_all();
  return true;
}

void DiskTier::NoteDrop(const std::string& why) {
  ++stats_.spill_drops;
  ++drops_since_log_;
  auto now = std::chrono::steady_clock::now();
  if (now - last_drop_log_ >= options_.log_interval) {
    TANDEM_LOG(WARNING) << "disk tier " << options_.directory << ": " << drops_since_log_
                        << " object(s) not spilled (" << why << "); serving from memory";
    last_drop_log_ = now;
    drops_since_log_ = 0;
  }
}

std::optional<uint64_t> DiskTier::Size(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return it->second.size;
  if (auto q = queued_.find(key); q != queued_.end()) return q->second->data.size();
  return std::nullopt;
}

std::vector<std::string> DiskTier::Keys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  keys.reserve(index_.size() + queued_.size());
  for (const auto& [key, e] : index_) keys.push_back(key);
  for (const auto& [key, p] : queued_) keys.push_back(key);
  return keys;
}

void DiskTier::EraseLocked(std::unordered_map<std::string, Entry>::iterator it) {
  unlink(PathOf(it->second.name_hash).c_str());
  lru_.erase(it->second.lru);
  by_hash_.erase(it->second.name_hash);
  stats_.bytes -= it->second.size;
  index_.erase(it);
  stats_.objects = index_.size();
}

void DiskTier::EvictLocked(uint64_t target, uint64_t incoming, std::vector<std::string>* evicted) {
  for (auto lit = lru_.begin(); lit != lru_.end() && stats_.bytes + incoming > target;) {
    auto it = index_.find(*lit);
    ++lit;
    if (it->second.readers > 0) continue;  // a read in flight holds its lease
    evicted->push_back(it->first);
    EraseLocked(it);
    ++stats_.evictions;
  }
}

Status DiskTier::Read(const std::string& key, uint8_t* dst, uint64_t size) {
  uint64_t name_hash = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      auto q = queued_.find(key);
      if (q == queued_.end()) return NotFoundError("not on disk");
      if (q->second->data.size() != size) return InvalidArgumentError("size differs");
      std::memcpy(dst, q->second->data.data(), size);  // evicted moments ago, not yet written
      return Status::Ok();
    }
    if (it->second.size != size) return InvalidArgumentError("size differs");
    ++it->second.readers;  // the lease: no eviction or replacement until the read ends
    lru_.splice(lru_.end(), lru_, it->second.lru);
    name_hash = it->second.name_hash;
  }
  bool ok = false;
  int fd = open(PathOf(name_hash).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    uint8_t head[kFileHeaderBytes];
    FileHeader h;
    std::string file_key;
    struct stat st;
    ok = fstat(fd, &st) == 0 && PreadAll(fd, head, kFileHeaderBytes, 0) &&
         DecodeFileHeader(head, &h) && h.key_len == key.size() && h.value_len == size &&
         static_cast<uint64_t>(st.st_size) == kFileHeaderBytes + h.key_len + size;
    if (ok) {
      file_key.resize(h.key_len);
      ok = PreadAll(fd, reinterpret_cast<uint8_t*>(file_key.data()), h.key_len, kFileHeaderBytes) &&
           file_key == key && PreadAll(fd, dst, size, kFileHeaderBytes + h.key_len) &&
           Checksum(key, dst, size) == h.checksum;
    }
    close(fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) --it->second.readers;
  if (ok) {
    stats_.bytes_read += size;
    return Status::Ok();
  }
  if (it != index_.end() && it->second.readers == 0) EraseLocked(it);
  ++stats_.corrupt;
  TANDEM_LOG(WARNING) << "disk tier: dropped the bad file of " << key
                      << " (truncated, or checksum mismatch)";
  return DataLossError("bad spill file for " + key);
}

bool DiskTier::WriteFile(const Pending& p, std::string* error) {
  uint64_t name_hash = XXH3_64bits(p.key.data(), p.key.size());
  std::string path = PathOf(name_hash);
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = std::string("open: ") + std::strerror(errno);
    return false;
  }
  const auto* value = reinterpret_cast<const uint8_t*>(p.data.data());
  FileHeader h{static_cast<uint32_t>(p.key.size()), p.data.size(),
               Checksum(p.key, value, p.data.size())};
  uint8_t head[kFileHeaderBytes];
  EncodeFileHeader(h, head);
  bool ok = WriteAll(fd, head, kFileHeaderBytes) && WriteAll(fd, p.key.data(), p.key.size()) &&
            WriteAll(fd, value, p.data.size());
  if (!ok) *error = std::string("write: ") + std::strerror(errno);
  close(fd);
  if (ok && rename(tmp.c_str(), path.c_str()) != 0) {
    *error = std::string("rename: ") + std::strerror(errno);
    ok = false;
  }
  if (!ok) unlink(tmp.c_str());
  return ok;
}

void DiskTier::WriterLoop() {
  while (true) {
    std::vector<std::string> dropped;
    const Pending* p = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      busy_ = true;
      p = &queue_.front();  // stays in place (and readable) until written
      uint64_t size = p->data.size();
      uint64_t name_hash = XXH3_64bits(p->key.data(), p->key.size());
      if (auto other = by_hash_.find(name_hash); other != by_hash_.end()) {
        auto it = index_.find(other->second);  // a 64-bit hash collision: replace that file
        if (it->second.readers > 0) {
          p = nullptr;
        } else {
          dropped.push_back(it->first);
          EraseLocked(it);
        }
      }
      if (p != nullptr && stats_.bytes + size > high_bytes_)
        EvictLocked(low_bytes_, size, &dropped);
      if (p != nullptr && stats_.bytes + size > high_bytes_) p = nullptr;  // the rest is read
      if (p == nullptr) {
        NoteDrop("no room in the spill size limit");
        dropped.push_back(queue_.front().key);
        queued_.erase(queue_.front().key);
        queued_bytes_ -= queue_.front().data.size();
        queue_.pop_front();
        cv_.notify_all();
      }
    }
    if (p != nullptr) {
      std::string error;
      bool ok = WriteFile(*p, &error);
      std::lock_guard<std::mutex> lock(mu_);
      if (ok) {
        Entry entry;
        entry.size = p->data.size();
        entry.name_hash = XXH3_64bits(p->key.data(), p->key.size());
        entry.lru = lru_.insert(lru_.end(), p->key);
        by_hash_[entry.name_hash] = p->key;
        index_[p->key] = entry;
        stats_.bytes += entry.size;
        stats_.objects = index_.size();
        ++stats_.spills;
        stats_.bytes_written += entry.size;
      } else {
        NoteDrop(error);
        dropped.push_back(p->key);
      }
      queued_.erase(p->key);
      queued_bytes_ -= p->data.size();
      queue_.pop_front();
      cv_.notify_all();
    }
    if (!dropped.empty() && options_.on_dropped) options_.on_dropped(dropped);
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
    cv_.notify_all();
  }
}

void DiskTier::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  DiskTierStats s = stats_;
  s.queued_bytes = queued_bytes_;
  return s;
}

}  // namespace tandem::pool
