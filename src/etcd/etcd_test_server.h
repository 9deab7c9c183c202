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

  // Starts etcd (the same ports and data dir on every call) and waits until it answers.
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
};

}  // namespace tandem::etcd
