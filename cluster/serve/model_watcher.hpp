#pragma once

// The model a server answers with, kept up to date from an export folder.
//
// MODEL_DIR has TensorFlow Serving's base-path layout: one folder per
// version, named by the version number in decimal (the checkpoint's global
// step), each made complete under a temporary name (".tmp-...") and renamed
// into place (`actorps export`, docs/guide/serving.md). The watcher serves
// the highest version that loads, and a thread looks for a higher one every
// poll interval, loads it beside the one serving and swaps the pointer: a
// request holds the shared_ptr it started with, so the old version lives
// until its last request is answered and no request sees two versions.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "models/servable.hpp"

namespace actorps {

/// Loads the export in one version folder: servable::load in the program, a
/// test double in tests.
/// @throws input_error (or any std::exception) naming what is wrong.
using servable_loader
  = std::function<std::shared_ptr<const servable>(const std::string& dir)>;

/// Keeps the newest loadable version of an export folder.
class model_watcher {
public:
  /// What became of a version the watcher tried: `error` empty when it
  /// serves now, else why it was refused.
  using load_hook
    = std::function<void(uint64_t version, const std::string& error)>;

  /// Loads the highest version of `model_dir` that loads (a refused one is
  /// logged and the next lower tried), then polls every `poll` (0: never;
  /// poll_once() by hand) for a higher one.
  /// @param on_load called for every version tried, from the constructor
  ///        and then from the polling thread; may be empty.
  /// @throws input_error if `model_dir` has no version, or none loads
  ///         (naming each version and why).
  model_watcher(std::string model_dir, servable_loader load,
                std::chrono::milliseconds poll, load_hook on_load = {});

  /// Stops polling (waits for a load in progress).
  ~model_watcher();

  model_watcher(const model_watcher&) = delete;
  model_watcher& operator=(const model_watcher&) = delete;

  /// The version serving now. Thread-safe; the caller's copy stays valid
  /// (and unchanged) however many swaps follow.
  std::shared_ptr<const servable> current() const {
    return std::atomic_load(&current_);
  }

  /// Looks once for a version higher than the one serving that was not
  /// refused before, and loads the highest such. A version that fails to
  /// load is logged with the reason, remembered and not tried again; the
  /// one serving stays. Returns whether it swapped. Called by the polling
  /// thread; safe to call from any thread (loads are serialized).
  bool poll_once();

  const std::string& model_dir() const noexcept {
    return dir_;
  }

private:
  /// Tries `version`; on success swaps it in.
  bool try_load(uint64_t version);

  std::string dir_;
  servable_loader load_;
  load_hook on_load_;
  std::shared_ptr<const servable> current_;
  /// Versions that failed to load.
  std::set<uint64_t> refused_;
  /// Serializes poll_once.
  std::mutex load_mtx_;
  // -- the polling thread --------------------------------------------------
  std::mutex stop_mtx_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace actorps
