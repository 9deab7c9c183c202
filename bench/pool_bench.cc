// pool_bench: throughput of the KV-cache pool client library against running workers.
//
//   pool_bench --put_worker IP:PORT [--get_worker IP:PORT] [--size 262144] [--batch 64]
//              [--total_mb 1024] [--rounds 3]
//
// Measures, for objects of --size bytes in batches of --batch:
//   put         Put() (copy into the shared arena + seal) on --put_worker
//   get_local   GetInto() on the same worker (zero-copy pin + one memcpy out + release)
//   pin_local   Get() alone (pin + release, no byte touched): the protocol's overhead
//   get_remote  GetInto() of fresh keys through --get_worker, which fetches them from
//               --put_worker over TCP (first touch: a real remote get every time)
// Prints one JSON line per measurement. GB/s (1e9 bytes/s) counts only the bytes that
// moved: a put's stored objects (its outcomes say how many were stored, already there,
// refused for space or invalid), a get's found objects. pin_local moves no bytes, so it
// reports pins per second and microseconds per batch instead.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "pool/pool_client.h"

using tandem::pool::PoolClient;
using tandem::pool::PoolClientOptions;
using tandem::pool::PutOutcome;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// An operation that moves bytes: `objects` of `size` bytes moved (stored or read) in
// `seconds`; `extra` is appended to the JSON object (", \"key\": value" pairs or empty).
void ReportBytes(const char* what, size_t objects, double seconds, size_t size, size_t batch,
                 const std::string& extra = "") {
  std::printf(
      "{\"op\": \"%s\", \"object_bytes\": %zu, \"batch\": %zu, \"objects\": %zu, \"GBps\": %.2f, "
      "\"objects_per_s\": %.0f%s}\n",
      what, size, batch, objects, objects * size / seconds / 1e9, objects / seconds, extra.c_str());
  std::fflush(stdout);
}

// An operation that moves no bytes: `objects` handled in `batches` calls in `seconds`.
void ReportOps(const char* what, size_t objects, size_t batches, double seconds, size_t size,
               size_t batch) {
  std::printf(
      "{\"op\": \"%s\", \"object_bytes\": %zu, \"batch\": %zu, \"objects\": %zu, "
      "\"objects_per_s\": %.0f, \"us_per_batch\": %.1f}\n",
      what, size, batch, objects, objects / seconds, seconds / static_cast<double>(batches) * 1e6);
  std::fflush(stdout);
}

// Counts of a put's outcomes; only kStored objects were copied into the arena.
struct PutCounts {
  size_t stored = 0, exists = 0, no_space = 0, invalid = 0;
  void Add(const std::vector<PutOutcome>& outcomes) {
    for (const PutOutcome o : outcomes) {
      switch (o) {
        case PutOutcome::kStored:
          ++stored;
          break;
        case PutOutcome::kExists:
          ++exists;
          break;
        case PutOutcome::kNoSpace:
          ++no_space;
          break;
        case PutOutcome::kInvalid:
          ++invalid;
          break;
      }
    }
  }
  std::string Json() const {
    return ", \"stored\": " + std::to_string(stored) + ", \"exists\": " + std::to_string(exists) +
           ", \"no_space\": " + std::to_string(no_space) + ", \"invalid\": " + std::to_string(invalid);
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> f;
  for (int i = 1; i + 1 < argc; i += 2) f[argv[i] + 2] = argv[i + 1];
  auto num = [&](const char* k, long d) { return f.count(k) ? std::atol(f[k].c_str()) : d; };
  size_t size = num("size", 256 << 10), batch = num("batch", 64);
  size_t total = static_cast<size_t>(num("total_mb", 1024)) << 20;
  int rounds = static_cast<int>(num("rounds", 3));
  size_t count = std::max<size_t>(batch, total / size / batch * batch);

  PoolClientOptions po;
  po.worker_address = f["put_worker"];
  auto put_client = PoolClient::Connect(po);
  if (!put_client.ok()) {
    std::fprintf(stderr, "pool_bench: %s\n", put_client.status().ToString().c_str());
    return 1;
  }
  // Page-aligned buffers, as KV-cache blocks are: a destination that is not 64-byte
  // aligned takes a much slower memcpy path on AMD (glibc's rep movsb).
  size_t bytes = size * batch;
  uint8_t* src = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  uint8_t* dst = static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131);
  std::memset(dst, 0, bytes);
  std::vector<std::span<const uint8_t>> values;
  std::vector<std::span<uint8_t>> buffers;
  for (size_t b = 0; b < batch; ++b) {
    values.emplace_back(src + b * size, size);
    buffers.emplace_back(dst + b * size, size);
  }
  auto keys_for = [&](const std::string& prefix, size_t first) {
    std::vector<std::string> keys;
    for (size_t b = 0; b < batch; ++b) keys.push_back(prefix + "@tp0@" + std::to_string(first + b));
    return keys;
  };

  for (int round = 0; round < rounds; ++round) {
    std::string prefix = "bench" + std::to_string(round) + "-" + std::to_string(getpid());
    double t0 = Now();
    PutCounts puts;
    for (size_t i = 0; i < count; i += batch) {
      auto r = (*put_client)->Put(keys_for(prefix, i), values);
      if (!r.ok()) return std::fprintf(stderr, "put: %s\n", r.status().ToString().c_str()), 1;
      puts.Add(*r);
    }
    ReportBytes("put", puts.stored, Now() - t0, size, batch, puts.Json());

    t0 = Now();
    size_t hits = 0;
    for (size_t i = 0; i < count; i += batch) {
      auto r = (*put_client)->GetInto(keys_for(prefix, i), buffers);
      if (!r.ok()) return std::fprintf(stderr, "get: %s\n", r.status().ToString().c_str()), 1;
      for (int64_t s : *r) hits += s > 0;
    }
    ReportBytes("get_local", hits, Now() - t0, size, batch);

    t0 = Now();
    hits = 0;
    for (size_t i = 0; i < count; i += batch) {
      auto r = (*put_client)->Get(keys_for(prefix, i));
      if (!r.ok()) return 1;
      hits += (*r)->num_found();
    }
    ReportOps("pin_local", hits, count / batch, Now() - t0, size, batch);

    if (!f["get_worker"].empty()) {
      PoolClientOptions go;
      go.worker_address = f["get_worker"];
      auto get_client = PoolClient::Connect(go);
      if (!get_client.ok()) return 1;
      // Fresh keys on the put worker, then read through the other worker.
      std::string rprefix = prefix + "-remote";
      size_t rcount = std::min(count, static_cast<size_t>(256u << 20) / size / batch * batch);
      for (size_t i = 0; i < rcount; i += batch)
        (*put_client)->Put(keys_for(rprefix, i), values).ok();
      // Let the write-behind directory entries land.
      for (int w = 0; w < 50; ++w) {
        auto e = (*get_client)->ExistPrefix(keys_for(rprefix, rcount - batch));
        if (e.ok() && *e == batch) break;
        usleep(20000);
      }
      t0 = Now();
      hits = 0;
      for (size_t i = 0; i < rcount; i += batch) {
        auto r = (*get_client)->GetInto(keys_for(rprefix, i), buffers);
        if (!r.ok()) return 1;
        for (int64_t s : *r) hits += s > 0;
      }
      ReportBytes("get_remote", hits, Now() - t0, size, batch);
    }
  }
  return 0;
}
