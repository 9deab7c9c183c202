// pool_tool: drives the pool client library from the command line, for the integration
// tests (tests/test_pool.py) and by hand.
//
//   pool_tool put   --prefix P --count N --size BYTES [--start I]
//   pool_tool get   --prefix P --count N --size BYTES [--start I]   (checks the bytes)
//   pool_tool exist --prefix P --count N [--start I]
//   pool_tool hold  --prefix P --count N --seconds S                (pins, then sleeps)
// Keys are "P@<i>"; values are a deterministic pattern of the key, so a get can verify
// them. The worker is --worker IP:PORT or $DS_WORKER_ADDR. Prints one JSON line.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "pool/pool_client.h"

namespace {

using tandem::pool::PoolClient;
using tandem::pool::PoolClientOptions;
using tandem::pool::PutOutcome;

uint8_t PatternByte(size_t key_index, size_t j) {
  return static_cast<uint8_t>((key_index * 131 + j * 7 + (j >> 9)) & 0xff);
}

void Fill(std::vector<uint8_t>* v, size_t key_index) {
  for (size_t j = 0; j < v->size(); ++j) (*v)[j] = PatternByte(key_index, j);
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "pool_tool: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: pool_tool put|get|exist|pin|hold --prefix P --count N ...");
  std::string cmd = argv[1];
  std::map<std::string, std::string> flags;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0) return Fail(std::string("bad argument ") + argv[i]);
    flags[argv[i] + 2] = argv[i + 1];
  }
  auto num = [&](const char* name, long def) {
    auto it = flags.find(name);
    return it == flags.end() ? def : std::atol(it->second.c_str());
  };
  std::string prefix = flags.count("prefix") ? flags["prefix"] : "k";
  size_t count = static_cast<size_t>(num("count", 1));
  size_t size = static_cast<size_t>(num("size", 4096));
  size_t start = static_cast<size_t>(num("start", 0));

  PoolClientOptions options;
  options.worker_address = flags.count("worker") ? flags["worker"] : "";
  options.auth_token = flags.count("auth_token") ? flags["auth_token"] : "";
  auto client = PoolClient::Connect(options);
  if (!client.ok()) return Fail(client.status().ToString());

  std::vector<std::string> keys;
  for (size_t i = 0; i < count; ++i) keys.push_back(prefix + "@" + std::to_string(start + i));

  if (cmd == "put") {
    std::vector<std::vector<uint8_t>> values(count, std::vector<uint8_t>(size));
    std::vector<std::span<const uint8_t>> spans;
    for (size_t i = 0; i < count; ++i) {
      Fill(&values[i], start + i);
      spans.emplace_back(values[i]);
    }
    auto r = (*client)->Put(keys, spans);
    if (!r.ok()) return Fail(r.status().ToString());
    size_t n[4] = {0, 0, 0, 0};
    for (PutOutcome o : *r) ++n[static_cast<int>(o)];
    std::printf("{\"stored\": %zu, \"exists\": %zu, \"no_space\": %zu, \"invalid\": %zu}\n", n[0],
                n[1], n[2], n[3]);
    return 0;
  }
  if (cmd == "get") {  // --batch B: gets of B keys (each released before the next)
    const bool verify = num("verify", 1) != 0;  // --verify 0: only time the gets
    size_t batch = static_cast<size_t>(num("batch", static_cast<long>(count)));
    if (batch == 0) batch = count;
    size_t hits = 0, remote = 0, disk = 0, corrupt = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (size_t b = 0; b < count; b += batch) {
      std::vector<std::string> chunk(keys.begin() + b, keys.begin() + std::min(count, b + batch));
      auto r = (*client)->Get(chunk);
      if (!r.ok()) return Fail(r.status().ToString());
      for (size_t i = 0; i < chunk.size(); ++i) {
        if (!(*r)->found(i)) continue;
        ++hits;
        remote += (*r)->remote(i) ? 1 : 0;
        disk += (*r)->source(i) == tandem::pool::ObjectSource::kDisk ? 1 : 0;
        auto data = (*r)->data(i);
        bool good = data.size() == size;
        for (size_t j = 0; verify && good && j < data.size(); ++j)
          good = data[j] == PatternByte(start + b + i, j);
        corrupt += good ? 0 : 1;
      }
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "{\"hits\": %zu, \"misses\": %zu, \"remote\": %zu, \"disk\": %zu, \"corrupt\": %zu, "
        "\"seconds\": %.6f}\n",
        hits, count - hits, remote, disk, corrupt, seconds);
    return 0;
  }
  if (cmd == "exist") {
    auto r = (*client)->Exist(keys);
    if (!r.ok()) return Fail(r.status().ToString());
    auto prefix_n = (*client)->ExistPrefix(keys);
    if (!prefix_n.ok()) return Fail(prefix_n.status().ToString());
    size_t n = 0;
    for (bool b : *r) n += b ? 1 : 0;
    std::printf("{\"exist\": %zu, \"prefix\": %zu}\n", n, *prefix_n);
    return 0;
  }
  if (cmd == "pin") {  // soft pin, --ttl_ms (0 = the worker's default)
    auto r = (*client)->SoftPin(keys, static_cast<uint32_t>(num("ttl_ms", 0)));
    if (!r.ok()) return Fail(r.status().ToString());
    size_t n = 0;
    for (bool b : *r) n += b ? 1 : 0;
    std::printf("{\"pinned\": %zu}\n", n);
    return 0;
  }
  if (cmd == "hold") {
    auto r = (*client)->Get(keys);
    if (!r.ok()) return Fail(r.status().ToString());
    std::printf("{\"pinned\": %zu}\n", (*r)->num_found());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(num("seconds", 10)));
    return 0;
  }
  return Fail("unknown command " + cmd);
}
