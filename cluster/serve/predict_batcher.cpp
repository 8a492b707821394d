#include "cluster/serve/predict_batcher.hpp"

#include <exception>

#include <fmt/format.h>

#include "cluster/serve/predict_request.hpp"
#include "core/log.hpp"

namespace actorps {

predict_batcher::predict_batcher(const batching_options& opts,
                                 servable_counters* counters,
                                 batch_hook on_batch)
  : opts_(opts), counters_(counters), on_batch_(std::move(on_batch)) {
  if (opts_.max_batch_rows == 0)
    opts_.max_batch_rows = 1;
  auto n = opts_.threads == 0 ? 1u : opts_.threads;
  for (uint32_t i = 0; i < n; ++i)
    threads_.emplace_back([this] { run(); });
}

predict_batcher::~predict_batcher() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    t.join();
}

uint64_t predict_batcher::queued_rows() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return queued_rows_;
}

batch_answer predict_batcher::predict(std::shared_ptr<const servable> model,
                                      example_batch batch) {
  auto p = std::make_unique<pending>();
  p->model = std::move(model);
  p->batch = std::move(batch);
  p->since = std::chrono::steady_clock::now();
  auto future = p->answer.get_future();
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stop_)
      throw request_error(503, "the server is stopping");
    auto rows = p->batch.rows;
    if (queued_rows_ > 0 && queued_rows_ + rows > opts_.max_queued_rows)
      throw request_error(503, fmt::format("overloaded: {} rows queued "
                                           "already (at most {}); try again",
                                           queued_rows_,
                                           opts_.max_queued_rows));
    queued_rows_ += rows;
    queue_.push_back(std::move(p));
  }
  cv_.notify_one();
  return future.get();
}

std::vector<std::unique_ptr<predict_batcher::pending>>
predict_batcher::next_batch() {
  std::vector<std::unique_ptr<pending>> out;
  std::unique_lock<std::mutex> guard{mtx_};
  cv_.wait(guard, [this] { return stop_ || !queue_.empty(); });
  if (queue_.empty())
    return out; // stopping
  // Wait for company until the first request has waited max_wait, unless
  // the batch is full already (or the batcher stops: answer what is here).
  auto rows_like_first = [this] {
    uint64_t rows = 0;
    for (auto& p : queue_)
      if (p->model == queue_.front()->model)
        rows += p->batch.rows;
    return rows;
  };
  auto deadline = queue_.front()->since + opts_.max_wait;
  while (!stop_ && !queue_.empty()
         && rows_like_first() < opts_.max_batch_rows
         && std::chrono::steady_clock::now() < deadline)
    cv_.wait_until(guard, deadline);
  if (queue_.empty())
    return out; // another thread took them
  // The first request, and those after it of the same servable that fit.
  auto model = queue_.front()->model;
  uint64_t rows = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto& p = *it;
    if (p->model != model
        || (!out.empty() && rows + p->batch.rows > opts_.max_batch_rows)) {
      ++it;
      continue;
    }
    rows += p->batch.rows;
    out.push_back(std::move(p));
    it = queue_.erase(it);
    if (rows >= opts_.max_batch_rows)
      break;
  }
  queued_rows_ -= rows;
  // Another thread may start on what is left.
  if (!queue_.empty())
    cv_.notify_one();
  return out;
}

void predict_batcher::run() {
  for (;;) {
    auto batch = next_batch();
    if (batch.empty()) {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stop_ && queue_.empty())
        return;
      continue;
    }
    answer(batch);
  }
}

void predict_batcher::answer(std::vector<std::unique_ptr<pending>>& batch) {
  const auto& model = *batch.front()->model;
  std::vector<batch_answer> answers;
  try {
    // One request runs on its own batch; several are copied into one.
    example_batch merged;
    const example_batch* input = &batch.front()->batch;
    if (batch.size() > 1) {
      merged.reset(model.schema().dense_dim, model.schema().fields.size());
      for (auto& p : batch)
        for (uint64_t r = 0; r < p->batch.rows; ++r)
          merged.append_row(p->batch, r);
      input = &merged;
    }
    auto out = model.predict(*input, counters_);
    auto outputs = model.outputs_per_example();
    if (out.size() != input->rows * outputs)
      throw std::logic_error(fmt::format("predict gave {} floats for {} rows "
                                         "x {} outputs",
                                         out.size(), input->rows, outputs));
    if (on_batch_)
      on_batch_(input->rows);
    uint64_t at = 0;
    for (auto& p : batch) {
      batch_answer a;
      a.outputs = outputs;
      a.version = model.version();
      auto n = p->batch.rows * outputs;
      a.predictions.assign(out.begin() + static_cast<ptrdiff_t>(at),
                           out.begin() + static_cast<ptrdiff_t>(at + n));
      at += n;
      answers.push_back(std::move(a));
    }
  } catch (const std::exception& e) {
    // The parser checked each request against this schema: a failure here
    // is the server's (500), answered to every request of the batch.
    log::error("serve", -1, "predict on version {} failed: {}",
               model.version(), e.what());
    for (auto& p : batch)
      p->answer.set_exception(std::make_exception_ptr(request_error(
        500, fmt::format("predict failed: {}", e.what()))));
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i)
    batch[i]->answer.set_value(std::move(answers[i]));
}

} // namespace actorps
