#include "bench/bench_training.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

namespace actorps::bench {

namespace {

using json = nlohmann::json;

std::string self_dir() {
  std::vector<char> buf(4096);
  auto n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  std::string path(buf.data(), n > 0 ? static_cast<size_t>(n) : 0);
  return path.substr(0, path.rfind('/'));
}

/// Runs `actorps COMMAND` with the job flags; returns its final metrics
/// record, or null if it failed.
json run_training(const std::string& command, int workers,
                  const std::string& extra) {
  auto metrics = fmt::format("/tmp/actorps-bench-{}-{}.jsonl", getpid(),
                             workers);
  auto cmd = fmt::format("'{}/actorps' {} --workers {} --ps 2 --quiet "
                         "--no-progress --metrics-out '{}' {} > /dev/null 2>&1",
                         self_dir(), command, workers, metrics, extra);
  fmt::print(stderr, "running: {}\n", cmd);
  if (std::system(cmd.c_str()) != 0) {
    std::remove(metrics.c_str());
    return nullptr;
  }
  std::ifstream in(metrics);
  std::string line;
  json last;
  while (std::getline(in, line))
    last = json::parse(line, nullptr, false);
  std::remove(metrics.c_str());
  return last.is_object() ? last : json(nullptr);
}

} // namespace

json run_training_suite(const std::string& config, int epochs, bool quick) {
  json results = json::array();
  auto job = fmt::format("--config '{}' --epochs {}", config, epochs);
  if (quick)
    job += " --train-limit 4000 --test-limit 500";
  std::vector<int> counts = quick ? std::vector<int>{1}
                                  : std::vector<int>{1, 2, 4};
  for (auto& [command, where] :
       std::vector<std::pair<std::string, std::string>>{
         {"train", "in-process"}, {"launch", "multi-process"}})
    for (int w : counts) {
      auto r = run_training(command, w, job);
      json entry{{"where", where}, {"workers", w}, {"ps", 2},
                 {"epochs", epochs}};
      if (r.is_object())
        for (auto key : {"samples_per_sec", "test_accuracy", "time_share",
                         "mean_staleness", "max_staleness"})
          if (r.contains(key))
            entry[key] = r[key];
      results.push_back(entry);
    }
  return results;
}

} // namespace actorps::bench
