#include "cluster/serve/model_watcher.hpp"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace fs = std::filesystem;

model_watcher::model_watcher(std::string model_dir, servable_loader load,
                             std::chrono::milliseconds poll,
                             load_hook on_load)
  : dir_(std::move(model_dir)),
    load_(std::move(load)),
    on_load_(std::move(on_load)) {
  auto versions = export_versions(dir_);
  if (versions.empty())
    throw input_error(fmt::format("{}: no version to serve (expected "
                                  "folders named by version number, as "
                                  "actorps export writes)",
                                  dir_));
  for (auto v = versions.rbegin(); v != versions.rend() && !current_; ++v)
    try_load(*v);
  if (!current_)
    throw input_error(fmt::format("{}: no version loads (see the lines "
                                  "above)",
                                  dir_));
  if (poll.count() > 0)
    thread_ = std::thread{[this, poll] {
      std::unique_lock<std::mutex> guard{stop_mtx_};
      std::string last_error;
      while (!stop_cv_.wait_for(guard, poll, [this] { return stop_; })) {
        guard.unlock();
        try {
          poll_once();
          last_error.clear();
        } catch (const std::exception& e) {
          // The folder went away or became unreadable: keep serving, and
          // say so once (not at every poll).
          if (last_error != e.what())
            log::warn("serve", -1, "{}; the version serving goes on",
                      e.what());
          last_error = e.what();
        }
        guard.lock();
      }
    }};
}

model_watcher::~model_watcher() {
  {
    std::lock_guard<std::mutex> guard{stop_mtx_};
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

bool model_watcher::poll_once() {
  std::lock_guard<std::mutex> guard{load_mtx_};
  auto serving = current()->version();
  auto versions = export_versions(dir_);
  for (auto v = versions.rbegin(); v != versions.rend() && *v > serving; ++v)
    if (refused_.count(*v) == 0)
      return try_load(*v);
  return false;
}

bool model_watcher::try_load(uint64_t version) {
  auto dir = (fs::path{dir_} / std::to_string(version)).string();
  std::string error;
  std::shared_ptr<const servable> next;
  try {
    next = load_(dir);
    if (!next)
      error = "the loader returned nothing";
    else if (next->version() != version)
      error = fmt::format("its manifest says version {}, its folder {}",
                          next->version(), version);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) {
    refused_.insert(version);
    auto* now = current_.get();
    log::warn("serve", -1, "version {} refused: {}; {}", version, error,
              now ? fmt::format("version {} keeps serving", now->version())
                  : std::string{"trying an older one"});
    if (on_load_)
      on_load_(version, error);
    return false;
  }
  auto* before = current_.get();
  log::info("serve", -1, "serving {} version {}{}", next->name(), version,
            before ? fmt::format(" (was {})", before->version())
                   : std::string{});
  std::atomic_store(&current_, std::move(next));
  if (on_load_)
    on_load_(version, {});
  return true;
}

} // namespace actorps
