// FaultyEtcdClient: an EtcdClient decorator for tests that fails calls on demand, as an
// unreachable etcd would (Unavailable), while passing the rest to the wrapped client.
//
// Thread safety: as the wrapped client; the fault switches are atomics.
#pragma once

#include <atomic>

#include "etcd/etcd_client.h"

namespace tandem::etcd {

class FaultyEtcdClient : public EtcdClient {
 public:
  explicit FaultyEtcdClient(EtcdClient* inner) : inner_(inner) {}  // borrowed

  // While set, every call fails with Unavailable (watches fail to open).
  void set_unavailable(bool v) { unavailable_ = v; }
  // Fails the next `n` calls.
  void FailNext(int n) { fail_next_ = n; }
  int calls() const { return calls_; }

  StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                        int64_t lease = 0) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->Put(key, value, lease);
  }
  StatusOr<RangeResult> Range(const std::string& key, const std::string& range_end) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->Range(key, range_end);
  }
  StatusOr<int64_t> DeleteRange(const std::string& key, const std::string& range_end) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->DeleteRange(key, range_end);
  }
  StatusOr<TxnResult> Txn(const std::vector<TxnCompare>& compares,
                          const std::vector<TxnOp>& success,
                          const std::vector<TxnOp>& failure) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->Txn(compares, success, failure);
  }
  StatusOr<int64_t> LeaseGrant(int64_t ttl_s) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->LeaseGrant(ttl_s);
  }
  StatusOr<int64_t> LeaseKeepAlive(int64_t lease_id) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->LeaseKeepAlive(lease_id);
  }
  Status LeaseRevoke(int64_t lease_id) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->LeaseRevoke(lease_id);
  }
  StatusOr<std::unique_ptr<EtcdWatch>> Watch(const std::string& key, const std::string& range_end,
                                             int64_t start_revision,
                                             WatchCallbacks callbacks) override {
    TANDEM_RETURN_IF_ERROR(Fault());
    return inner_->Watch(key, range_end, start_revision, std::move(callbacks));
  }

 private:
  Status Fault() {
    ++calls_;
    int n = fail_next_.load();
    while (n > 0 && !fail_next_.compare_exchange_weak(n, n - 1)) {
    }
    if (unavailable_ || n > 0) return UnavailableError("injected etcd fault");
    return Status::Ok();
  }

  EtcdClient* inner_;
  std::atomic<bool> unavailable_{false};
  std::atomic<int> fail_next_{0};
  std::atomic<int> calls_{0};
};

}  // namespace tandem::etcd
