#include "core/stream_ranges.hpp"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>

#include "core/bad_record.hpp"
#include "core/data_registry.hpp"
#include "core/job_config.hpp"
#include "core/error.hpp"
#include "core/example_batch.hpp"
#include "core/part_format.hpp"

namespace actorps {

part_reader::part_reader(stream_config cfg, size_t keep)
  : cfg_(std::move(cfg)), schema_(stream_schema(cfg_)),
    keep_(std::max<size_t>(keep, 1)) {
}

uint64_t part_reader::parts_read() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return parts_read_;
}

std::shared_ptr<const dataset> part_reader::part(const std::string& name) {
  // Parsed under the lock: the other workers of the process want the same
  // part next, and wait for it rather than parse it again.
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [n, d] : cache_)
    if (n == name)
      return d;
  auto path = (std::filesystem::path{cfg_.dir} / name).string();
  // Quiet: the coordinator's source logs a part's bad records once.
  bad_record_sink bad{cfg_.bad_records};
  auto d = std::make_shared<const dataset>(
    find_part_format(cfg_.format).read(path, cfg_, schema_, bad));
  ++parts_read_;
  cache_.emplace_back(name, std::move(d));
  while (cache_.size() > keep_)
    cache_.pop_front();
  return cache_.back().second;
}

void part_reader::read(const data_range& r, example_batch& out) {
  if (r.name.empty() || r.name.find('/') != std::string::npos)
    throw input_error(fmt::format("stream part {}: \"{}\" is not a part's "
                                  "file name",
                                  r.part, r.name));
  auto held = part(r.name);
  auto& d = *held;
  if (r.end > d.examples.rows)
    throw input_error(fmt::format("stream part {} ({}): rows {} to {} asked "
                                  "for, but it holds {}",
                                  r.part, r.name, r.begin, r.end,
                                  d.examples.rows));
  out.reset(d.examples.dense_dim, d.examples.fields.size());
  for (auto row = r.begin; row < r.end; ++row)
    out.append_row(d.examples, row);
}

void ranges_only_source::next(example_batch&) {
  throw std::logic_error("a worker of a job whose examples the coordinator "
                         "hands out got a closure without its examples "
                         "(data range)");
}

void ranges_only_source::seek(data_position pos) {
  pos_ = pos;
}

namespace {

class stream_provider final : public data_provider {
public:
  explicit stream_provider(const job_config& cfg)
    : cfg_(stream_config_of(cfg)), schema_(stream_schema(cfg_)),
      test_(std::make_shared<dataset>()) {
    test_->schema = schema_;
    test_->examples.reset(schema_.dense_dim, schema_.fields.size());
  }

  const data_schema& schema() override {
    return schema_;
  }

  uint64_t train_rows() override {
    return 0;
  }

  std::shared_ptr<batch_source> train_source(const input_context&,
                                             uint64_t batch_size,
                                             uint64_t) override {
    return std::make_shared<ranges_only_source>(schema_, batch_size);
  }

  std::shared_ptr<const dataset> test_set() override {
    return test_;
  }

  std::string describe() const override {
    return fmt::format("a stream of {} parts from {}", cfg_.format, cfg_.dir);
  }

private:
  stream_config cfg_;
  data_schema schema_;
  std::shared_ptr<dataset> test_;
};

} // namespace

std::unique_ptr<data_provider> open_stream_provider(const job_config& cfg) {
  return std::make_unique<stream_provider>(cfg);
}

} // namespace actorps
