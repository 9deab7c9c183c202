// HttpEtcdClient: EtcdClient over etcd's v3 JSON gateway (POST /v3/kv/range, /v3/kv/put,
// /v3/kv/deleterange, /v3/kv/txn, /v3/lease/grant|keepalive|revoke, /v3/watch) on plain
// HTTP. Keys and values travel base64-encoded, 64-bit numbers as JSON strings.
//
// Endpoints: "IP:PORT" or "http://IP:PORT", several separated by commas; a call that
// cannot reach one endpoint moves to the next for the following calls.
// Every unary call is bounded by `request_timeout`; a watch is a long-lived streamed
// POST whose end (etcd stopped or restarted) is reported through on_closed.
//
// Thread safety: all methods are thread-safe. A watch handle must not be destroyed from
// inside its own callbacks.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "etcd/etcd_client.h"

namespace tandem::net {
class HttpClient;
}

namespace tandem::etcd {

struct HttpEtcdClientOptions {
  std::string endpoints;  // "IP:PORT[,IP:PORT...]"
  std::chrono::milliseconds request_timeout{3000};
};

class HttpEtcdClient : public EtcdClient {
 public:
  // InvalidArgument when `endpoints` has no valid "host:port".
  static StatusOr<std::unique_ptr<HttpEtcdClient>> Create(HttpEtcdClientOptions options);
  ~HttpEtcdClient() override;

  StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                        int64_t lease = 0) override;
  StatusOr<RangeResult> Range(const std::string& key, const std::string& range_end) override;
  StatusOr<int64_t> DeleteRange(const std::string& key, const std::string& range_end) override;
  StatusOr<TxnResult> Txn(const std::vector<TxnCompare>& compares,
                          const std::vector<TxnOp>& success,
                          const std::vector<TxnOp>& failure) override;
  StatusOr<int64_t> LeaseGrant(int64_t ttl_s) override;
  StatusOr<int64_t> LeaseKeepAlive(int64_t lease_id) override;
  Status LeaseRevoke(int64_t lease_id) override;
  StatusOr<std::unique_ptr<EtcdWatch>> Watch(const std::string& key, const std::string& range_end,
                                             int64_t start_revision,
                                             WatchCallbacks callbacks) override;

 private:
  struct Endpoint {
    std::string host;
    uint16_t port = 0;
  };
  HttpEtcdClient(HttpEtcdClientOptions options, std::vector<Endpoint> endpoints);

  // POSTs `json_body` to `path` on the current endpoint; returns the response body of a
  // 200 answer, or the gateway's error mapped to a Status.
  StatusOr<std::string> Call(const std::string& path, const std::string& json_body);

  HttpEtcdClientOptions options_;
  std::vector<Endpoint> endpoints_;
  std::atomic<size_t> current_endpoint_{0};
  std::unique_ptr<net::HttpClient> http_;
};

}  // namespace tandem::etcd
