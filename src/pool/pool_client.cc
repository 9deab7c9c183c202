#include "pool/pool_client.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "net/socket_connection.h"
#include "pool/frame_io.h"
#include "pool/messages.h"
#include "pool/wire.h"

namespace tandem::pool {

namespace {

// The arena as mapped in this process; unmapped when the last user lets go.
struct Mapping {
  uint8_t* base = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, size);
  }
};

// One mapping per worker arena for the whole client: every connection receives the
// same memfd, and mapping it once means each page is faulted in once per process.
class MappingCache {
 public:
  StatusOr<std::shared_ptr<Mapping>> Get(int fd, uint64_t size) {
    struct stat st {};
    if (fstat(fd, &st) != 0) return DataLossError("fstat of the pool arena fd failed");
    std::lock_guard<std::mutex> lock(mu_);
    auto current = current_.lock();
    if (current && st.st_dev == dev_ && st.st_ino == ino_ && current->size == size) return current;
    // Small arenas are populated at once (page tables only: the worker holds the pages);
    // for big ones the first touch of each page pays a minor fault instead.
    int flags = MAP_SHARED | (size <= (16ull << 30) ? MAP_POPULATE : 0);
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, fd, 0);
    if (p == MAP_FAILED) {
      return ResourceExhaustedError("mapping the pool arena: " + std::string(std::strerror(errno)));
    }
    auto m = std::make_shared<Mapping>();
    m->base = static_cast<uint8_t*>(p);
    m->size = size;
    current_ = m;
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    return m;
  }

 private:
  std::mutex mu_;
  std::weak_ptr<Mapping> current_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace

// One connection to the local worker and its arena mapping. `mu` is held by whoever
// uses the channel (one request at a time on a connection).
class Channel {
 public:
  std::mutex mu;
  std::unique_ptr<net::SocketConnection> conn;  // null: not connected
  std::shared_ptr<Mapping> mapping;
  uint64_t generation = 0;  // bumped on every (re)connect: pins of older ones are gone
  uint64_t next_id = 1;

  explicit Channel(std::shared_ptr<MappingCache> maps) : maps_(std::move(maps)) {}

  Status Connect(const PoolClientOptions& o) {
    conn.reset();
    ++generation;
    TANDEM_ASSIGN_OR_RETURN(conn,
                            net::ConnectUnix(UnixSocketName(o.worker_address), o.connect_timeout));
    TANDEM_RETURN_IF_ERROR(conn->SetIoTimeout(o.request_timeout));
    std::string hello = EncodeHelloRequest({o.auth_token, static_cast<uint8_t>(Role::kClient)});
    UniqueFd arena_fd;
    FrameHeader h;
    std::string body;
    Status s = SendFrame(*conn, {MsgType::kHello, 0, 0, 0}, hello);
    if (s.ok()) s = RecvFrame(*conn, &h, &body, &arena_fd);
    if (s.ok()) s = StatusFromResponse(h, body);
    if (!s.ok()) {
      conn.reset();
      return s.WithContext("pool worker " + o.worker_address);
    }
    HelloResponse answer;
    s = DecodeHelloResponse(body, &answer);
    if (!s.ok() || !arena_fd.valid() || answer.arena_bytes == 0) {
      conn.reset();
      return DataLossError("pool worker " + o.worker_address + ": bad HELLO answer (no arena)");
    }
    auto m = maps_->Get(arena_fd.get(), answer.arena_bytes);
    if (!m.ok()) {
      conn.reset();
      return m.status();
    }
    mapping = std::move(m).value();
    return Status::Ok();
  }

  // One request/response. Any transport or framing failure closes the connection.
  StatusOr<std::string> Call(MsgType type, std::string_view body) {
    if (conn == nullptr) return UnavailableError("not connected");
    uint64_t id = next_id++;
    FrameHeader h;
    std::string reply;
    Status s = SendFrame(*conn, {type, 0, 0, id}, body);
    if (s.ok()) s = RecvFrame(*conn, &h, &reply);
    if (s.ok() && (h.request_id != id || h.type != type)) s = DataLossError("mismatched response");
    if (!s.ok()) {
      conn.reset();
      return s;
    }
    TANDEM_RETURN_IF_ERROR(StatusFromResponse(h, reply));
    return reply;
  }

  std::shared_ptr<MappingCache> maps_;

  // Whether [offset, offset + size) lies inside the arena.
  bool InArena(uint64_t offset, uint64_t size) const {
    return mapping && size <= mapping->size && offset <= mapping->size - size;
  }
};

// A few threads running the async calls.
class PoolClient::Executor {
 public:
  explicit Executor(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~Executor() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stop_ and drained
        fn = std::move(tasks_.front());
        tasks_.pop_front();
      }
      fn();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
};

namespace {

Status CheckKeys(const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    if (k.empty() || k.size() > kMaxKeyBytes) {
      return InvalidArgumentError("pool keys must be 1.." + std::to_string(kMaxKeyBytes) +
                                  " bytes");
    }
  }
  return Status::Ok();
}

template <typename T>
std::vector<T> Slice(const std::vector<T>& v, size_t begin, size_t end) {
  return std::vector<T>(v.begin() + begin, v.begin() + end);
}

}  // namespace

size_t PinnedObjects::num_found() const {
  size_t n = 0;
  for (const auto& it : items_) n += it.found ? 1 : 0;
  return n;
}

PinnedObjects::~PinnedObjects() { Release(); }

void PinnedObjects::Release() {
  if (!channel_) return;
  std::lock_guard<std::mutex> lock(channel_->mu);
  // A reconnected channel means the old connection (and its pins) is gone already.
  if (channel_->generation == channel_generation_ && channel_->conn != nullptr) {
    for (size_t i = 0; i < pinned_keys_.size(); i += kMaxKeysPerFrame) {
      std::string body =
          EncodeKeys(Slice(pinned_keys_, i, std::min(pinned_keys_.size(), i + kMaxKeysPerFrame)));
      if (!channel_->Call(MsgType::kRelease, body).ok()) break;  // closed: pins dropped
    }
  }
  channel_.reset();
  mapping_.reset();
  pinned_keys_.clear();
  for (auto& it : items_) it.data = {};
}

PoolClient::PoolClient(PoolClientOptions options) : options_(std::move(options)) {}

PoolClient::~PoolClient() { executor_.reset(); }

StatusOr<std::unique_ptr<PoolClient>> PoolClient::Connect(PoolClientOptions options) {
  if (options.worker_address.empty()) {
    const char* env = std::getenv("DS_WORKER_ADDR");
    if (env == nullptr || *env == '\0') {
      return InvalidArgumentError("no pool worker address (set DS_WORKER_ADDR=IP:PORT)");
    }
    options.worker_address = env;
  }
  if (options.auth_token.empty()) {
    const char* env = std::getenv("TANDEM_POOL_AUTH_TOKEN");
    if (env != nullptr) options.auth_token = env;
  }
  TANDEM_RETURN_IF_ERROR(ParseHostPort(options.worker_address).status());
  if (options.num_connections < 1) options.num_connections = 1;
  if (options.max_keys_per_request == 0 || options.max_keys_per_request > kMaxKeysPerFrame) {
    options.max_keys_per_request = 512;
  }
  std::unique_ptr<PoolClient> client(new PoolClient(options));
  auto maps = std::make_shared<MappingCache>();
  for (int i = 0; i < options.num_connections; ++i)
    client->channels_.push_back(std::make_shared<Channel>(maps));
  {
    std::lock_guard<std::mutex> lock(client->channels_[0]->mu);
    TANDEM_RETURN_IF_ERROR(client->channels_[0]->Connect(client->options_));
  }
  client->executor_ = std::make_unique<Executor>(options.num_connections);
  return client;
}

StatusOr<std::shared_ptr<Channel>> PoolClient::AcquireChannel() {
  static std::atomic<size_t> rotor{0};
  size_t start = rotor.fetch_add(1);
  for (size_t i = 0; i < channels_.size(); ++i) {
    auto& c = channels_[(start + i) % channels_.size()];
    if (c->mu.try_lock()) return c;
  }
  auto& c = channels_[start % channels_.size()];
  c->mu.lock();
  return c;
}

void PoolClient::ReleaseChannel(const std::shared_ptr<Channel>& channel) { channel->mu.unlock(); }

template <typename Fn>
auto PoolClient::WithChannel(Fn&& fn) -> decltype(fn(std::declval<Channel&>())) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Channel> c, AcquireChannel());
  struct Unlock {
    PoolClient* self;
    std::shared_ptr<Channel> c;
    ~Unlock() { self->ReleaseChannel(c); }
  } unlock{this, c};
  bool fresh = false;
  if (c->conn == nullptr) {
    TANDEM_RETURN_IF_ERROR(c->Connect(options_));
    fresh = true;
  }
  auto result = fn(*c);
  if (!result.ok() && !fresh && c->conn == nullptr) {
    // The connection broke (the worker restarted?): once more on a fresh one.
    TANDEM_RETURN_IF_ERROR(c->Connect(options_));
    result = fn(*c);
  }
  return result;
}

StatusOr<std::vector<bool>> PoolClient::Exist(const std::vector<std::string>& keys) {
  TANDEM_RETURN_IF_ERROR(CheckKeys(keys));
  return WithChannel([&](Channel& c) -> StatusOr<std::vector<bool>> {
    std::vector<bool> out;
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); i += options_.max_keys_per_request) {
      size_t end = std::min(keys.size(), i + options_.max_keys_per_request);
      TANDEM_ASSIGN_OR_RETURN(std::string reply,
                              c.Call(MsgType::kExist, EncodeKeys(Slice(keys, i, end))));
      if (reply.size() != end - i) return DataLossError("EXIST answer of the wrong size");
      for (char code : reply) out.push_back(static_cast<uint8_t>(code) != 0);
    }
    return out;
  });
}

StatusOr<std::vector<bool>> PoolClient::SoftPin(const std::vector<std::string>& keys,
                                                uint32_t ttl_ms) {
  TANDEM_RETURN_IF_ERROR(CheckKeys(keys));
  return WithChannel([&](Channel& c) -> StatusOr<std::vector<bool>> {
    std::vector<bool> out;
    out.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); i += options_.max_keys_per_request) {
      size_t end = std::min(keys.size(), i + options_.max_keys_per_request);
      TANDEM_ASSIGN_OR_RETURN(
          std::string reply,
          c.Call(MsgType::kSoftPin, EncodeSoftPinRequest(ttl_ms, Slice(keys, i, end))));
      if (reply.size() != end - i) return DataLossError("SOFT_PIN answer of the wrong size");
      for (char code : reply) out.push_back(code == 0);
    }
    return out;
  });
}

StatusOr<size_t> PoolClient::ExistPrefix(const std::vector<std::string>& keys) {
  TANDEM_RETURN_IF_ERROR(CheckKeys(keys));
  return WithChannel([&](Channel& c) -> StatusOr<size_t> {
    size_t n = 0;
    for (size_t i = 0; i < keys.size(); i += options_.max_keys_per_request) {
      size_t end = std::min(keys.size(), i + options_.max_keys_per_request);
      TANDEM_ASSIGN_OR_RETURN(std::string reply,
                              c.Call(MsgType::kExist, EncodeKeys(Slice(keys, i, end))));
      if (reply.size() != end - i) return DataLossError("EXIST answer of the wrong size");
      for (char code : reply) {
        if (code == 0) return n;
        ++n;
      }
    }
    return n;
  });
}

StatusOr<std::vector<PutOutcome>> PoolClient::Put(
    const std::vector<std::string>& keys, const std::vector<std::span<const uint8_t>>& values) {
  if (keys.size() != values.size())
    return InvalidArgumentError("Put: keys and values differ in count");
  TANDEM_RETURN_IF_ERROR(CheckKeys(keys));
  return WithChannel([&](Channel& c) -> StatusOr<std::vector<PutOutcome>> {
    std::vector<PutOutcome> out(keys.size(), PutOutcome::kInvalid);
    for (size_t i = 0; i < keys.size(); i += options_.max_keys_per_request) {
      size_t end = std::min(keys.size(), i + options_.max_keys_per_request);
      // Values that cannot be stored never reach the worker.
      std::vector<size_t> idx;
      std::vector<PutAllocItem> alloc;
      for (size_t k = i; k < end; ++k) {
        if (!values[k].empty() && values[k].size() <= kMaxObjectBytes) {
          idx.push_back(k);
          alloc.push_back({keys[k], values[k].size()});
        }
      }
      if (idx.empty()) continue;
      TANDEM_ASSIGN_OR_RETURN(std::string reply,
                              c.Call(MsgType::kPutAlloc, EncodePutAllocRequest(alloc)));
      std::vector<PutAllocAnswer> answers;
      TANDEM_RETURN_IF_ERROR(DecodePutAllocResponse(reply, idx.size(), &answers));
      std::vector<PutSealItem> seal;
      for (size_t j = 0; j < idx.size(); ++j) {
        const size_t k = idx[j];
        const auto [code, offset] = answers[j];
        if (code > 3) return DataLossError("PUT_ALLOC: unknown answer code");
        out[k] = static_cast<PutOutcome>(code);
        if (code != static_cast<uint8_t>(AllocCode::kAllocated)) continue;
        bool inside = c.InArena(offset, values[k].size());
        if (inside)
          std::memcpy(c.mapping->base + offset, values[k].data(), values[k].size());
        else
          out[k] = PutOutcome::kInvalid;
        seal.push_back({keys[k], inside});  // abort what we could not write
      }
      if (seal.empty()) continue;
      TANDEM_RETURN_IF_ERROR(c.Call(MsgType::kPutSeal, EncodePutSealRequest(seal)).status());
    }
    return out;
  });
}

StatusOr<std::unique_ptr<PinnedObjects>> PoolClient::Get(const std::vector<std::string>& keys) {
  TANDEM_RETURN_IF_ERROR(CheckKeys(keys));
  std::unique_ptr<PinnedObjects> pinned(new PinnedObjects());
  // Reads on one channel, which then holds the pins; PinnedObjects releases them there.
  std::shared_ptr<Channel> used;
  Status s = WithChannel([&](Channel& c) -> StatusOr<bool> {
               pinned->items_.assign(keys.size(), {});
               pinned->pinned_keys_.clear();
               for (size_t i = 0; i < keys.size(); i += options_.max_keys_per_request) {
                 size_t end = std::min(keys.size(), i + options_.max_keys_per_request);
                 TANDEM_ASSIGN_OR_RETURN(std::string reply,
                                         c.Call(MsgType::kGet, EncodeKeys(Slice(keys, i, end))));
                 std::vector<GetAnswer> answers;
                 TANDEM_RETURN_IF_ERROR(DecodeGetResponse(reply, end - i, &answers));
                 for (size_t k = i; k < end; ++k) {
                   const auto [code, offset, size] = answers[k - i];
                   if (code == static_cast<uint8_t>(GetCode::kMiss)) continue;
                   pinned->pinned_keys_.push_back(keys[k]);
                   if (code > 3 || !c.InArena(offset, size))
                     continue;  // pinned but unusable: a miss
                   auto& item = pinned->items_[k];
                   item.found = true;
                   item.source =
                       code == static_cast<uint8_t>(GetCode::kRemoteHit) ? ObjectSource::kRemote
                       : code == static_cast<uint8_t>(GetCode::kDiskHit) ? ObjectSource::kDisk
                                                                         : ObjectSource::kMemory;
                   item.data = std::span<const uint8_t>(c.mapping->base + offset, size);
                 }
               }
               pinned->mapping_ = c.mapping;
               pinned->channel_generation_ = c.generation;
               for (auto& ch : channels_) {
                 if (ch.get() == &c) used = ch;
               }
               return true;
             }).status();
  if (!s.ok()) {
    // Pins taken before the failure die with the closed connection.
    return s;
  }
  pinned->channel_ = used;
  return pinned;
}

StatusOr<std::vector<int64_t>> PoolClient::GetInto(const std::vector<std::string>& keys,
                                                   const std::vector<std::span<uint8_t>>& buffers) {
  if (keys.size() != buffers.size())
    return InvalidArgumentError("GetInto: keys and buffers differ in count");
  std::vector<int64_t> sizes(keys.size(), -1);
  // Chunked so a huge batch does not pin the whole arena at once.
  size_t chunk = options_.max_keys_per_request;
  for (size_t i = 0; i < keys.size(); i += chunk) {
    size_t end = std::min(keys.size(), i + chunk);
    TANDEM_ASSIGN_OR_RETURN(auto pinned, Get(Slice(keys, i, end)));
    for (size_t k = i; k < end; ++k) {
      auto data = pinned->data(k - i);
      if (!pinned->found(k - i) || data.size() > buffers[k].size()) continue;
      std::memcpy(buffers[k].data(), data.data(), data.size());
      sizes[k] = static_cast<int64_t>(data.size());
    }
  }
  return sizes;
}

std::future<StatusOr<std::vector<bool>>> PoolClient::ExistAsync(std::vector<std::string> keys) {
  auto task = std::make_shared<std::packaged_task<StatusOr<std::vector<bool>>()>>(
      [this, keys = std::move(keys)] { return Exist(keys); });
  auto fut = task->get_future();
  executor_->Post([task] { (*task)(); });
  return fut;
}

std::future<StatusOr<std::vector<PutOutcome>>> PoolClient::PutAsync(
    std::vector<std::string> keys, std::vector<std::span<const uint8_t>> values) {
  auto task = std::make_shared<std::packaged_task<StatusOr<std::vector<PutOutcome>>()>>(
      [this, keys = std::move(keys), values = std::move(values)] { return Put(keys, values); });
  auto fut = task->get_future();
  executor_->Post([task] { (*task)(); });
  return fut;
}

std::future<StatusOr<std::vector<int64_t>>> PoolClient::GetIntoAsync(
    std::vector<std::string> keys, std::vector<std::span<uint8_t>> buffers) {
  auto task = std::make_shared<std::packaged_task<StatusOr<std::vector<int64_t>>()>>(
      [this, keys = std::move(keys), buffers = std::move(buffers)] {
        return GetInto(keys, buffers);
      });
  auto fut = task->get_future();
  executor_->Post([task] { (*task)(); });
  return fut;
}

}  // namespace tandem::pool
