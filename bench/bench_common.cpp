#include "bench/bench_common.hpp"

#include <algorithm>
#include <atomic>
#include <utility>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

namespace actorps::bench {

double point::pct(double p) const {
  auto xs = latencies;
  std::sort(xs.begin(), xs.end());
  return xs[std::min(xs.size() - 1, static_cast<size_t>(p * xs.size()))];
}

point make_point(std::string kind, std::string op, std::string where,
                  uint64_t floats, int workers) {
  point p;
  p.kind = std::move(kind);
  p.op = std::move(op);
  p.where = std::move(where);
  p.floats = floats;
  p.workers = workers;
  return p;
}

std::vector<point>& points() {
  static std::vector<point> result;
  return result;
}

void record(benchmark::State& st, point p) {
  auto p50 = p.pct(0.5);
  st.counters["p50_ms"] = p50 * 1e3;
  st.counters["p90_ms"] = p.pct(0.9) * 1e3;
  if (p.keys > 0)
    st.counters["keys/s"] = static_cast<double>(p.keys) / p50;
  else
    st.counters["GB/s"] = static_cast<double>(p.floats) * 4 / p50 / 1e9;
  points().push_back(std::move(p));
}

uint64_t next_closure() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

std::string count_label(uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0)
    return fmt::format("{}M", n >> 20);
  if (n >= 1024 && n % 1024 == 0)
    return fmt::format("{}K", n >> 10);
  return std::to_string(n);
}

} // namespace actorps::bench
