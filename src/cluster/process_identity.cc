#include "cluster/process_identity.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tandem::cluster {
namespace {

struct ProcStat {
  char state = '?';
  uint64_t start_ticks = 0;
};

StatusOr<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (pid <= 0 || !std::getline(in, line))
    return NotFoundError("no process " + std::to_string(pid));
  // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so the fields
  // are counted after the last ')'. STATE is field 3, starttime field 22.
  const size_t close = line.rfind(')');
  if (close == std::string::npos)
    return InternalError("unreadable /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(line.substr(close + 1));
  ProcStat stat;
  fields >> stat.state;
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;
  fields >> stat.start_ticks;
  if (!fields) return InternalError("unreadable /proc/" + std::to_string(pid) + "/stat");
  return stat;
}

}  // namespace

StatusOr<ProcessIdentity> IdentifyProcess(pid_t pid) {
  TANDEM_ASSIGN_OR_RETURN(ProcStat stat, ReadProcStat(pid));
  return ProcessIdentity{pid, stat.start_ticks};
}

ProcessIdentity SelfIdentity() {
  StatusOr<ProcessIdentity> self = IdentifyProcess(getpid());
  return self.ok() ? *self : ProcessIdentity{getpid(), 0};
}

bool IsRunning(const ProcessIdentity& p) {
  StatusOr<ProcStat> stat = ReadProcStat(p.pid);
  return stat.ok() && stat->state != 'Z' && stat->state != 'X' &&
         stat->start_ticks == p.start_ticks;
}

}  // namespace tandem::cluster
