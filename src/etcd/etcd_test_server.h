// EtcdTestServer: a real etcd (/usr/bin/etcd or $TANDEM_ETCD_BIN) for tests, on free
// 127.0.0.1 ports with its own --data-dir in a temp directory, stopped by pid.
//
// Thread safety: one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tandem::etcd {

class EtcdTestServer {
 public:
  EtcdTestServer();
  ~EtcdTestServer();  // kills etcd and removes the data dir

  static bool Available();  // the etcd binary exists

  // Starts etcd (the same ports and data dir on every call once it has started) and
  // waits until it answers. Before the first successful start, an etcd that exits at
  // once (its free ports taken meanwhile by a test running in parallel) is retried on
  // new ports, a few times.
  Status Start();
  // SIGTERM (graceful) or SIGKILL, then waits for the process.
  void Stop(bool kill = false);

  std::string endpoint() const;  // "127.0.0.1:PORT"
  uint16_t client_port() const { return client_port_; }

 private:
  std::string dir_;
  uint16_t client_port_ = 0;
  uint16_t peer_port_ = 0;
  pid_t pid_ = -1;
  bool started_ = false;

  Status StartOnce();
};

}  // namespace tandem::etcd
