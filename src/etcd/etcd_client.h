// EtcdClient: the small etcd v3 interface Tandem needs (key-value, transactions, leases,
// watches). HttpEtcdClient (http_etcd_client.h) implements it over etcd's JSON gateway;
// FaultyEtcdClient (faulty_etcd_client.h) wraps any client to inject failures in tests.
//
// Errors follow status.h: etcd unreachable, timed out or restarting -> Unavailable
// (retry); a lease etcd does not know -> NotFound; a malformed answer -> Internal.
//
// Thread safety: implementations are safe to call from any thread concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tandem::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;  // 0 = no lease
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // the store revision the range was read at
};

// One comparison of a transaction; the key's field `target` is compared to the operand.
struct TxnCompare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  int64_t number = 0;  // operand for the revision/version targets
  std::string value;   // operand for kValue
};

// One operation of a transaction branch.
struct TxnOp {
  enum class Kind { kPut, kDelete };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  int64_t lease = 0;      // kPut; 0 = none
  std::string range_end;  // kDelete; empty = the key alone
};

struct TxnResult {
  bool succeeded = false;  // whether every compare held (the success branch ran)
  int64_t revision = 0;
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;  // for kDelete only key and mod_revision are set
};

// Handle of one watch. Destroying it cancels the watch (no callback runs afterwards).
class EtcdWatch {
 public:
  virtual ~EtcdWatch() = default;
};

struct WatchCallbacks {
  // Events in revision order; runs on a client thread and must not block.
  std::function<void(const std::vector<WatchEvent>& events, int64_t revision)> on_events;
  // The watch ended (connection lost, etcd restarted, compacted revision, cancelled by
  // etcd). Runs at most once, never after the handle is destroyed. The caller re-lists
  // and watches again.
  std::function<void(Status status)> on_closed;
};

class EtcdClient {
 public:
  virtual ~EtcdClient() = default;

  // Puts key=value (bound to `lease` when non-zero). Returns the new store revision.
  virtual StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                                int64_t lease = 0) = 0;
  // Keys in [key, range_end); an empty range_end reads `key` alone.
  virtual StatusOr<RangeResult> Range(const std::string& key, const std::string& range_end) = 0;
  // Deletes [key, range_end) (empty range_end: the key alone). Returns the number deleted.
  virtual StatusOr<int64_t> DeleteRange(const std::string& key, const std::string& range_end) = 0;
  virtual StatusOr<TxnResult> Txn(const std::vector<TxnCompare>& compares,
                                  const std::vector<TxnOp>& success,
                                  const std::vector<TxnOp>& failure) = 0;

  // Grants a lease of `ttl_s` seconds; returns its id.
  virtual StatusOr<int64_t> LeaseGrant(int64_t ttl_s) = 0;
  // Renews the lease; returns its remaining TTL in seconds. NotFound when etcd no longer
  // knows the lease (expired or revoked): its keys are gone.
  virtual StatusOr<int64_t> LeaseKeepAlive(int64_t lease_id) = 0;
  // Revokes the lease, deleting its keys. NotFound if it does not exist.
  virtual Status LeaseRevoke(int64_t lease_id) = 0;

  // Watches [key, range_end) from `start_revision` (0 = from now).
  virtual StatusOr<std::unique_ptr<EtcdWatch>> Watch(const std::string& key,
                                                     const std::string& range_end,
                                                     int64_t start_revision,
                                                     WatchCallbacks callbacks) = 0;

  // Convenience wrappers.
  StatusOr<RangeResult> RangePrefix(const std::string& prefix) {
    return Range(prefix, PrefixEnd(prefix));
  }
  // Puts only if the key does not exist; returns whether it was put.
  StatusOr<bool> PutIfAbsent(const std::string& key, const std::string& value, int64_t lease = 0);

  // The range_end that makes [prefix, end) cover every key starting with prefix.
  static std::string PrefixEnd(const std::string& prefix);
};

}  // namespace tandem::etcd
