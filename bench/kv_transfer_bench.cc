// kv_transfer_bench: KV transfer throughput on this host, TCP loopback and the same-host
// shared-memory path, for the blocks of one prompt, with a plain memcpy of the same
// bytes as the reference measured in the same run.
//
//   build/src/transfer/kv_transfer_bench [--tokens 2000] [--layers 18] [--kv-dim 256]
//                                        [--block-size 16] [--reps 20]
// Defaults are the geometry of the default model (gemma3 270M: 18 layers, one KV head of
// 256). Prints one line per path: bytes per pull, median seconds, GB/s, ratio to memcpy.
// Every pull is checked: its destination blocks are poisoned first (outside the timing;
// with --fresh they are untouched zero pages instead), and afterwards the K and V bytes
// of every pulled block must equal the source block's; a mismatch fails the run (exit 1).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "transfer/lease_table.h"
#include "transfer/transfer_client.h"
#include "transfer/transfer_server.h"

using namespace tandem;
using namespace tandem::transfer;

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A byte the destination blocks are filled with before a pull. The source pattern
// (byte i = i * 131 mod 256) takes every value once in any 256 consecutive bytes, so a
// block the pull left unwritten (or wrote only partly) differs from its source.
constexpr uint8_t kPoison = 0xA5;

void Poison(const KvMemory& m, const std::vector<int32_t>& blocks) {
  for (const int32_t b : blocks) {
    std::memset(m.BlockK(b), kPoison, m.k_block_bytes);
    std::memset(m.BlockV(b), kPoison, m.v_block_bytes);
  }
}

// Blocks whose K or V bytes at dst[i] in `to` differ from src[i] in `from`.
int MismatchedBlocks(const KvMemory& from, const std::vector<int32_t>& src, const KvMemory& to,
                     const std::vector<int32_t>& dst) {
  int bad = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    if (std::memcmp(to.BlockK(dst[i]), from.BlockK(src[i]), from.k_block_bytes) != 0 ||
        std::memcmp(to.BlockV(dst[i]), from.BlockV(src[i]), from.v_block_bytes) != 0) {
      ++bad;
    }
  }
  return bad;
}

int Arg(int argc, char** argv, const char* name, int def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const int tokens = Arg(argc, argv, "--tokens", 2000);
  const int layers = Arg(argc, argv, "--layers", 18);
  const int kv_dim = Arg(argc, argv, "--kv-dim", 256);
  const int block_size = Arg(argc, argv, "--block-size", 16);
  const int reps = Arg(argc, argv, "--reps", 20);
  // --fresh 1: every pull reads producer pages this process never mapped and writes
  // consumer blocks never touched (as a live decode instance does), instead of reusing
  // warm pages.
  const bool fresh = Arg(argc, argv, "--fresh", 0) != 0;
  const int n_blocks = (tokens + block_size - 1) / block_size;
  const int64_t arena_blocks = static_cast<int64_t>(n_blocks) * (fresh ? 2 * (reps + 2) + 1 : 2);
  const uint64_t k_bytes = static_cast<uint64_t>(layers) * block_size * kv_dim * 2;
  const uint64_t v_bytes = k_bytes;

  // Producer arena in a memfd (as a producer engine has it); consumer arena anonymous.
  const uint64_t size = (k_bytes + v_bytes) * arena_blocks;
  const int fd = memfd_create("bench-arena", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) return 1;
  auto* p = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  auto* c = static_cast<uint8_t*>(mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  madvise(c, size, MADV_HUGEPAGE);  // as the engine's arena
  for (uint64_t i = 0; i < size; ++i) p[i] = static_cast<uint8_t>(i * 131);
  if (!fresh) std::memset(c, 0, size);
  KvMemory pm{p, p + k_bytes * arena_blocks, k_bytes, v_bytes, arena_blocks, fd, size, 0, k_bytes * arena_blocks, 1};
  KvMemory cm{c, c + k_bytes * arena_blocks, k_bytes, v_bytes, arena_blocks};

  LeaseTable leases(std::chrono::seconds(30), std::chrono::seconds(480), nullptr);
  TransferServerOptions so;
  so.bind_host = "127.0.0.1";
  TransferServer server(so, pm, &leases, "bench");
  if (!server.Start().ok()) return 1;
  SocketTransport sockets;

  std::vector<int32_t> remote(n_blocks);
  std::vector<int32_t> local(n_blocks);
  for (int i = 0; i < n_blocks; ++i) {
    remote[i] = i;
    // Distinct blocks in the consumer; with --fresh the pulls take blocks n_blocks and up
    // (chunks 1..), so the reference writes blocks 0.. and leaves theirs untouched.
    local[i] = fresh ? i : n_blocks + i;
  }
  const uint64_t bytes = (k_bytes + v_bytes) * n_blocks;
  std::printf("kv_transfer_bench: %d tokens = %d blocks of %llu bytes = %.1f MB per pull, %d reps, %ld cores%s\n",
              tokens, n_blocks, static_cast<unsigned long long>(k_bytes + v_bytes), bytes / 1e6, reps,
              sysconf(_SC_NPROCESSORS_ONLN), fresh ? ", fresh pages every pull" : "");

  // Reference: memcpy of the same blocks, arena to arena.
  std::vector<double> ref;
  for (int r = 0; r < reps + 2; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n_blocks; ++i) {
      std::memcpy(cm.BlockK(local[i]), pm.BlockK(remote[i]), k_bytes);
      std::memcpy(cm.BlockV(local[i]), pm.BlockV(remote[i]), v_bytes);
    }
    if (r >= 2) ref.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double ref_s = Median(ref);
  std::printf("%-22s %9.2f ms  %6.2f GB/s  (reference)\n", "memcpy", ref_s * 1e3, bytes / ref_s / 1e9);

  int failures = 0;
  for (const bool shm : {false, true}) {
    TransferClient client(&sockets, cm, "bench", shm);
    std::vector<double> times;
    for (int r = 0; r < reps + 2; ++r) {
      const std::string id = "req-" + std::to_string(r) + (shm ? "s" : "t");
      std::vector<int32_t> src = remote;
      std::vector<int32_t> dst = local;
      if (fresh) {  // blocks of this rep only, on both sides
        const int chunk = 1 + r + (shm ? reps + 2 : 0);
        for (int i = 0; i < n_blocks; ++i) src[i] = dst[i] = chunk * n_blocks + i;
      }
      if (!leases.Keep(id, src).ok()) return 1;
      if (!fresh) Poison(cm, dst);  // fresh blocks are zero pages, which differ as well
      const auto t0 = std::chrono::steady_clock::now();
      StatusOr<PullResult> res = client.Pull({"127.0.0.1", server.port(), id, src, dst});
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      leases.TakeFreeable();
      if (!res.ok() || res->used_shm != shm) {
        std::fprintf(stderr, "pull failed: %s\n", res.ok() ? "wrong path" : res.status().ToString().c_str());
        ++failures;
        continue;
      }
      if (const int bad = MismatchedBlocks(pm, src, cm, dst); bad > 0) {
        std::fprintf(stderr, "data mismatch: %s pull %d, %d of %d blocks differ from the source (K or V)\n",
                     shm ? "same-host" : "tcp", r, bad, n_blocks);
        ++failures;
      }
      if (r >= 2) times.push_back(s);  // the first pulls map the arena / warm the socket
    }
    if (times.empty()) continue;
    const double t = Median(times);
    std::printf("%-22s %9.2f ms  %6.2f GB/s  %.2fx memcpy\n", shm ? "same-host (memfd)" : "tcp loopback", t * 1e3,
                bytes / t / 1e9, ref_s / t);
  }
  server.Stop();
  return failures == 0 ? 0 : 1;
}
