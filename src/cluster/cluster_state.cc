#include "cluster/cluster_state.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tandem::cluster {
namespace {

using nlohmann::json;

json ProcessToJson(const ProcessIdentity& p) {
  return {{"pid", p.pid}, {"start_ticks", p.start_ticks}};
}

ProcessIdentity ProcessFromJson(const json& j) {
  return {j.at("pid").get<pid_t>(), j.at("start_ticks").get<uint64_t>()};
}

}  // namespace

std::string ClusterStateToJson(const ClusterState& state) {
  json services = json::array();
  for (const ServiceState& s : state.services) {
    services.push_back({{"name", s.name},
                        {"kind", s.kind},
                        {"pid", s.process.pid},
                        {"start_ticks", s.process.start_ticks},
                        {"ports", s.ports},
                        {"log", s.log_path}});
  }
  json j = {{"cluster", state.cluster},   {"node", state.node},
            {"status", state.status},     {"supervisor", ProcessToJson(state.supervisor)},
            {"logs_dir", state.logs_dir}, {"proxy_url", state.proxy_url},
            {"services", services}};
  return j.dump(2) + "\n";
}

StatusOr<ClusterState> ParseClusterState(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, false);
  if (!j.is_object()) return InvalidArgumentError("not a tandem up state file (not a JSON object)");
  // Inside this function only: at()/get() throw on a missing or mistyped field.
  try {
    ClusterState state;
    state.cluster = j.at("cluster").get<std::string>();
    state.node = j.at("node").get<std::string>();
    state.status = j.at("status").get<std::string>();
    state.supervisor = ProcessFromJson(j.at("supervisor"));
    state.logs_dir = j.at("logs_dir").get<std::string>();
    state.proxy_url = j.value("proxy_url", "");
    for (const json& s : j.at("services")) {
      ServiceState service;
      service.name = s.at("name").get<std::string>();
      service.kind = s.at("kind").get<std::string>();
      service.process = ProcessFromJson(s);
      service.ports = s.at("ports").get<std::map<std::string, int>>();
      service.log_path = s.at("log").get<std::string>();
      state.services.push_back(std::move(service));
    }
    return state;
  } catch (const json::exception& e) {
    return InvalidArgumentError(std::string("not a tandem up state file: ") + e.what());
  }
}

Status WriteClusterState(const std::string& path, const ClusterState& state) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ClusterStateToJson(state);
    out.flush();
    if (!out) return InternalError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return InternalError("cannot rename " + tmp + " to " + path);
  }
  return Status::Ok();
}

StatusOr<ClusterState> ReadClusterState(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError("no state file " + path);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<ClusterState> state = ParseClusterState(text.str());
  if (!state.ok()) return state.status().WithContext(path);
  return state;
}

}  // namespace tandem::cluster
