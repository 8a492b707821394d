#pragma once

// What every part of actorps-bench shares: one measured operation (a point),
// the run's list of them, the clock and the size labels.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace benchmark {
class State;
} // namespace benchmark

namespace actorps::bench {

using std::chrono::steady_clock;

inline double seconds_since(steady_clock::time_point t0) {
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

/// One measured operation: every iteration's latency in seconds, so that
/// percentiles are exact.
struct point {
  /// "limit" (dense limits), "transfer" (dense pull/push), "sparse" (table
  /// pull/push), "sparse-limit" (the hash-map limit of a sparse row) or
  /// "sparse-tcp" (raw TCP moving a sparse row's bytes).
  std::string kind;
  /// memcpy, axpy, tcp, pull, push.
  std::string op;
  /// "in-process" or "loopback" (two processes on 127.0.0.1).
  std::string where;
  /// Dense: floats moved. Sparse: keys x dim.
  uint64_t floats = 0;
  int workers = 1;
  std::vector<double> latencies;
  // -- sparse only ------------------------------------------------------------
  /// Keys per request (unique).
  uint64_t keys = 0;
  /// "warm": every row exists before the timed iterations; "cold": each
  /// iteration's keys are new to the table (first touch: rows created).
  std::string rows;
  /// Payload bytes one way and back (keys and floats, without headers).
  uint64_t bytes_out = 0;
  uint64_t bytes_back = 0;

  /// The p-quantile (0 <= p < 1) of the latencies, in seconds.
  /// @pre !latencies.empty()
  double pct(double p) const;
};

/// A point without latencies (sparse points then set keys, rows, bytes).
point make_point(std::string kind, std::string op, std::string where,
                  uint64_t floats, int workers = 1);

/// Every point measured so far, in the order measured. Not thread-safe: the
/// benchmarks run one after another on the main thread.
std::vector<point>& points();

/// Sets `st`'s counters from `p` (p50 and p90 in ms; GB/s for dense points,
/// keys/s for sparse ones) and appends `p` to points().
void record(benchmark::State& st, point p);

/// A closure id no other push of this process used (a ps applies one push
/// per closure id and discards repeats).
uint64_t next_closure();

/// "1K", "64K", "1M" for multiples of 1024 and 1048576; else the number.
std::string count_label(uint64_t n);

} // namespace actorps::bench
