#pragma once

// A test double of models/servable.hpp for the server's tests: its answers
// say which version gave them and what the instance held, so a test can
// tell a request answered by two versions, or with another request's rows.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"
#include "models/servable.hpp"

namespace actorps::test {

/// Dense features 2, field "user" (vocabulary 10), field "tags" (unbounded,
/// weighted); or, with dense_only, 3 dense features and no fields.
inline data_schema double_schema(bool dense_only = false) {
  data_schema s;
  if (dense_only) {
    s.dense_dim = 3;
  } else {
    s.dense_dim = 2;
    s.fields = {field_schema{"user", 10, false},
                field_schema{"tags", 0, true}};
  }
  s.labels = label_kind::multiclass;
  s.classes = 2;
  return s;
}

/// Row r's answer: [version, sum of dense + sum of key x value over the
/// fields]. A gate, when closed, holds predict until it opens.
class double_servable : public servable {
public:
  double_servable(uint64_t version, bool dense_only = false,
                  std::string name = "double")
    : name_(std::move(name)), version_(version),
      schema_(double_schema(dense_only)) {
    // nop
  }

  const std::string& name() const override {
    return name_;
  }
  uint64_t version() const override {
    return version_;
  }
  const data_schema& schema() const override {
    return schema_;
  }
  uint32_t outputs_per_example() const override {
    return 2;
  }

  std::vector<float> predict(const example_batch& b,
                             servable_counters* counters) const override {
    if (b.dense_dim != schema_.dense_dim
        || b.dense.size() != b.rows * b.dense_dim
        || b.fields.size() != schema_.fields.size())
      throw input_error("double_servable: a batch of another shape");
    {
      std::unique_lock<std::mutex> guard{gate_mtx_};
      ++entered_;
      gate_cv_.notify_all();
      gate_cv_.wait(guard, [this] { return open_; });
    }
    std::vector<float> out;
    for (uint64_t r = 0; r < b.rows; ++r) {
      double sum = 0;
      for (uint64_t d = 0; d < b.dense_dim; ++d)
        sum += b.dense[r * b.dense_dim + d];
      for (size_t f = 0; f < b.fields.size(); ++f) {
        auto& fld = b.fields[f];
        for (auto i = fld.offsets[r]; i < fld.offsets[r + 1]; ++i)
          sum += double(fld.keys[i]) * (fld.values.empty() ? 1.0
                                                           : fld.values[i]);
      }
      out.push_back(float(version_));
      out.push_back(float(sum));
    }
    if (counters)
      counters->examples += b.rows;
    return out;
  }

  /// Closes (predict waits) or opens the gate.
  void set_gate(bool open) const {
    std::lock_guard<std::mutex> guard{gate_mtx_};
    open_ = open;
    gate_cv_.notify_all();
  }

  /// Waits until `n` predict calls have started (at most 30 s).
  bool wait_entered(uint64_t n) const {
    std::unique_lock<std::mutex> guard{gate_mtx_};
    return gate_cv_.wait_for(guard, std::chrono::seconds{30},
                             [&] { return entered_ >= n; });
  }

private:
  std::string name_;
  uint64_t version_;
  data_schema schema_;
  mutable std::mutex gate_mtx_;
  mutable std::condition_variable gate_cv_;
  mutable bool open_ = true;
  mutable uint64_t entered_ = 0;
};

/// A loader of version folders for model_watcher: a folder holding a file
/// "corrupt" is refused (as a bad checksum would be); any other loads as a
/// double_servable of the folder's version (its name), after `delay`.
inline std::shared_ptr<const servable>
load_double(const std::string& dir,
            std::chrono::milliseconds delay = std::chrono::milliseconds{0}) {
  namespace fs = std::filesystem;
  if (fs::exists(fs::path{dir} / "corrupt"))
    throw input_error(dir + "/dense.bin: checksum mismatch");
  std::this_thread::sleep_for(delay);
  return std::make_shared<double_servable>(
    std::stoull(fs::path{dir}.filename().string()));
}

/// Makes MODEL_DIR/<version> as an export does (a temporary name renamed
/// into place), corrupt or not.
inline void add_version(const std::string& model_dir, uint64_t version,
                        bool corrupt = false) {
  namespace fs = std::filesystem;
  auto tmp = fs::path{model_dir} / fmt::format(".tmp-{}", version);
  fs::create_directories(tmp);
  std::ofstream{tmp / "manifest.json"} << "{}";
  if (corrupt)
    std::ofstream{tmp / "corrupt"} << "x";
  fs::rename(tmp, fs::path{model_dir} / std::to_string(version));
}

} // namespace actorps::test
