// Expert parallelism's two model-side pieces: which rank owns which experts
// (ExpertShard, vLLM's contiguous layout) and the collectives a MoE layer needs to send
// tokens to the ranks owning their experts and take the results back (ExpertExchange).
// dist/expert_parallel_group.h implements ExpertExchange over Gloo; the model library
// only sees this interface, so it builds without Gloo.
//
// Thread safety: an ExpertExchange is used by one thread (the engine loop) at a time.
#pragma once

#include <cstdint>
#include <span>

#include "common/status.h"

namespace tandem {

// Rank `rank` of `size` owns the contiguous experts [First, First + Count): every rank
// gets n / size, the first n % size ranks one more (vLLM's determine_expert_map).
struct ExpertShard {
  int rank = 0;
  int size = 1;

  bool sharded() const { return size > 1; }
  int Count(int n_expert) const { return n_expert / size + (rank < n_expert % size ? 1 : 0); }
  int First(int n_expert) const {
    const int base = n_expert / size, extra = n_expert % size;
    return rank * base + (rank < extra ? rank : extra);
  }
  // The rank that owns expert e.
  static int Owner(int e, int n_expert, int size) {
    const int base = n_expert / size, extra = n_expert % size;
    const int big = extra * (base + 1);  // experts held by the ranks with one more
    return e < big ? e / (base + 1) : extra + (e - big) / base;
  }
};

// The collectives of one expert-parallel group. Every rank must make the same calls in
// the same order (the ranks step in lockstep). After the first failure (a peer gone, a
// timeout) status() stays that error and every later call returns it at once.
class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // recv[d] = what rank d put in its send[this rank] (size() entries each).
  virtual Status ExchangeCounts(std::span<const int64_t> send, std::span<int64_t> recv) = 0;
  // All-to-all of float rows: send holds send_rows[0] rows for rank 0, then rank 1's, ...;
  // recv receives recv_rows[d] rows from each rank d, in rank order. A row is
  // `row_floats` floats.
  virtual Status ExchangeRows(const float* send, std::span<const int64_t> send_rows, float* recv,
                              std::span<const int64_t> recv_rows, int64_t row_floats) = 0;
  // True when `local` is true on any rank (an all-reduce).
  virtual StatusOr<bool> AnyRank(bool local) = 0;
  virtual Status status() const = 0;
  // After a failure: true once the group has been re-formed (status() is OK again and
  // the next call is every rank's first of a step). Call between steps only.
  virtual bool TryResume() { return false; }
};

}  // namespace tandem
