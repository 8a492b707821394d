#pragma once

// Batching of concurrent prediction requests: requests that arrive within a
// bounded wait of each other go through one servable::predict call (one
// matrix product instead of many), as TensorFlow Serving's batching
// (max_batch_size, batch_timeout_micros) does.
//
// Each request brings the servable it was parsed against, and a batch only
// ever holds requests of one servable: a request is parsed, predicted and
// answered by one version, however the versions change meanwhile.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/example_batch.hpp"
#include "models/servable.hpp"

namespace actorps {

/// The batching knobs (`actorps serve` flags of the same names).
struct batching_options {
  /// Rows per predict call: requests are added to a batch while it stays
  /// at or under this (a single larger request runs alone).
  uint64_t max_batch_rows = 256;
  /// How long the first request of a batch waits for others; 0: no wait
  /// (each batch is what is queued at that moment).
  std::chrono::microseconds max_wait{2000};
  /// Rows queued at most; a request that would pass it is refused
  /// (overloaded: 503) instead of waiting in an ever longer queue.
  uint64_t max_queued_rows = 65536;
  /// Threads calling predict (each runs one batch at a time).
  uint32_t threads = 2;
};

/// What a request gets back.
struct batch_answer {
  /// rows x outputs floats, row-major.
  std::vector<float> predictions;
  uint32_t outputs = 0;
  /// The version that predicted them (the request's servable's).
  uint64_t version = 0;
};

/// Gathers requests into batches and runs them on a pool of threads.
/// Thread-safe: predict() is called by the HTTP server's threads at once.
class predict_batcher {
public:
  /// Called after each predict call with the rows it ran (for metrics);
  /// from a batcher thread.
  using batch_hook = std::function<void(uint64_t rows)>;

  /// @param counters  handed to every servable::predict (unknown keys,
  ///                  examples); may be null; must outlive the batcher.
  predict_batcher(const batching_options& opts, servable_counters* counters,
                  batch_hook on_batch = {});

  /// Answers the queued requests, then stops the threads.
  ~predict_batcher();

  predict_batcher(const predict_batcher&) = delete;
  predict_batcher& operator=(const predict_batcher&) = delete;

  /// Queues `batch` (of `model`'s schema, rows >= 1) and waits for its
  /// predictions.
  /// @throws request_error 503 if the queue holds max_queued_rows already
  ///         or the batcher is stopping; 500 if predict throws (naming why).
  batch_answer predict(std::shared_ptr<const servable> model,
                       example_batch batch);

  /// Rows waiting now.
  uint64_t queued_rows() const;

private:
  struct pending {
    std::shared_ptr<const servable> model;
    example_batch batch;
    std::chrono::steady_clock::time_point since;
    std::promise<batch_answer> answer;
  };

  void run();
  /// Takes the next batch from the queue (empty when stopping).
  std::vector<std::unique_ptr<pending>> next_batch();
  void answer(std::vector<std::unique_ptr<pending>>& batch);

  batching_options opts_;
  servable_counters* counters_;
  batch_hook on_batch_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<pending>> queue_;
  uint64_t queued_rows_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

} // namespace actorps
