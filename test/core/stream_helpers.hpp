#pragma once

// What the stream tests share: a small click-log stream (one dense feature,
// one field whose key is the example's global number), parts written as a
// producer writes them, and a source whose diagnostics are kept.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/stream_dir.hpp"
#include "core/stream_source.hpp"
#include "test/temp_dir.hpp"

namespace actorps::test {

using namespace std::chrono_literals;

/// A stream of ctr_csv parts with one dense feature and one field, polled
/// every 2 ms.
inline stream_config small_stream(const temp_dir& dir) {
  stream_config cfg;
  cfg.dir = dir.path().string();
  cfg.dense_features = 1;
  cfg.fields = 1;
  cfg.poll_interval = 2ms;
  return cfg;
}

/// `n` rows numbered first .. first + n - 1: label i % 2, I1 = i, C1 = i.
inline std::string rows_text(uint64_t first, uint64_t n) {
  std::string text = "label,I1,C1\n";
  for (auto i = first; i < first + n; ++i)
    text += fmt::format("{},{},{}\n", i % 2, i, i);
  return text;
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary};
  out << text;
}

/// Writes part `name` as a producer does (temporary name, rename), with its
/// marker unless `mark` is false.
inline void put_part(const temp_dir& dir, const std::string& name,
                     const std::string& text, bool mark = true) {
  write_text(dir.file("." + name + ".tmp"), text);
  std::filesystem::rename(dir.file("." + name + ".tmp"), dir.file(name));
  if (mark)
    write_text(dir.file(name + ".done"), "");
}

/// The keys of field 0, one per row: the rows' global numbers.
inline std::vector<uint64_t> row_ids(const dataset& ds) {
  return ds.examples.fields[0].keys;
}

/// Diagnostics of a source, kept (thread-safe: a producer thread may look).
struct kept_log {
  std::mutex mtx;
  std::vector<std::string> lines;

  stream_env env() {
    stream_env e;
    e.log = [this](const std::string& line) {
      std::lock_guard<std::mutex> guard{mtx};
      lines.push_back(line);
    };
    return e;
  }

  /// How many lines contain `what`.
  size_t count(const std::string& what) {
    std::lock_guard<std::mutex> guard{mtx};
    size_t n = 0;
    for (auto& l : lines)
      n += l.find(what) != std::string::npos ? 1 : 0;
    return n;
  }

  std::string all() {
    std::lock_guard<std::mutex> guard{mtx};
    std::string out;
    for (auto& l : lines)
      out += l + "\n";
    return out;
  }
};

/// The names of every part `src` hands out, without waiting.
inline std::vector<std::string> drain(stream_source& src) {
  std::vector<std::string> names;
  while (auto part = src.next_part(0ms))
    names.push_back(part->name);
  return names;
}

} // namespace actorps::test
