// The hot path of a table shard: pull (create) then apply (SGD) of batches of
// random existing keys, timed per row. It uses only table_store's
// constructor, pull() and apply(), so the same file builds against the core
// library of any commit: an A/B of two commits is
//
//   g++ -O3 -march=native -std=c++17 -I. bench/table_hot_path.cpp
//       LIB.a -lfmt -labsl_raw_hash_set -labsl_hash -labsl_city
//       -labsl_low_level_hash -lcsv -lz -o hot_path
//
// once per library, then running the binaries in turn (A B A B).
// Arguments: rows (default 100000), batch (4096), operations (1000000 rows
// pulled and as many applied), seed.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/table_store.hpp"
#include "core/update_rule.hpp"

namespace {

/// Plain SGD without slots (w -= 0.01 g), so that the rule costs little next
/// to the store.
class hot_path_sgd : public actorps::update_rule {
public:
  const std::string& name() const override {
    return name_;
  }
  size_t slot_count() const override {
    return 0;
  }
  void apply(float* w, float* const*, const float* g, size_t n,
             uint64_t) const override {
    for (size_t j = 0; j < n; ++j)
      w[j] -= 0.01f * g[j];
  }
  std::string describe() const override {
    return name_;
  }

private:
  std::string name_ = "hot_path_sgd";
};

} // namespace

int main(int argc, char** argv) {
  uint64_t rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
  size_t batch = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4096;
  uint64_t ops = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1000000;
  uint64_t seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1;
  const uint64_t dim = 16;
  actorps::table_shard_def def{"emb", dim, 0, 0.05f, 42};
  actorps::table_store store{def, std::make_shared<hot_path_sgd>()};
  std::mt19937_64 gen{seed};
  std::vector<uint64_t> universe(rows);
  for (auto& k : universe)
    k = gen();
  std::vector<float> out(batch * dim);
  for (size_t b = 0; b < rows; b += batch) {
    size_t n = std::min<size_t>(batch, rows - b);
    store.pull(universe.data() + b, n, out.data(), true);
  }
  // Batches of distinct keys (a window of a shuffled universe).
  std::shuffle(universe.begin(), universe.end(), gen);
  std::vector<float> grads(batch * dim, 0.5f);
  using clock = std::chrono::steady_clock;
  double pull_s = 0, apply_s = 0;
  uint64_t done = 0;
  size_t at = 0;
  while (done < ops) {
    if (at + batch > rows)
      at = 0;
    const uint64_t* keys = universe.data() + at;
    auto t0 = clock::now();
    store.pull(keys, batch, out.data(), true);
    auto t1 = clock::now();
    store.apply(keys, batch, grads.data());
    auto t2 = clock::now();
    pull_s += std::chrono::duration<double>(t1 - t0).count();
    apply_s += std::chrono::duration<double>(t2 - t1).count();
    done += batch;
    at += batch;
  }
  std::printf("rows %llu dim %llu batch %zu ops %llu: pull %.2f ns/row, "
              "apply %.2f ns/row\n",
              static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(dim), batch,
              static_cast<unsigned long long>(done), pull_s * 1e9 / done,
              apply_s * 1e9 / done);
  return out[0] == 12345.0f ? 1 : 0; // keeps the pulls alive
}
