#include "cluster/serve/serve_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace actorps {

namespace {

/// 50 us, 100 us, 200 us, ... 3.3 s: doublings from a local call to a slow
/// network.
prometheus::Histogram::BucketBoundaries latency_buckets() {
  prometheus::Histogram::BucketBoundaries out;
  for (double b = 50e-6; b < 4.0; b *= 2)
    out.push_back(b);
  return out;
}

prometheus::Histogram::BucketBoundaries row_buckets() {
  prometheus::Histogram::BucketBoundaries out;
  for (double b = 1; b <= 4096; b *= 2)
    out.push_back(b);
  return out;
}

} // namespace

serve_metrics::serve_metrics()
  : registry_(std::make_shared<prometheus::Registry>()),
    requests_(prometheus::BuildCounter()
                .Name("actorps_serve_requests_total")
                .Help("Answers by endpoint (predict, model, metadata, "
                      "health, metrics, other) and HTTP status code")
                .Register(*registry_)),
    errors_(prometheus::BuildCounter()
              .Name("actorps_serve_errors_total")
              .Help("Answers with a status of 400 or more, by endpoint")
              .Register(*registry_)),
    latency_(prometheus::BuildHistogram()
               .Name("actorps_serve_request_seconds")
               .Help("Predict requests from arrival to answer, in seconds")
               .Register(*registry_)
               .Add({}, latency_buckets())),
    batch_rows_(prometheus::BuildHistogram()
                  .Name("actorps_serve_batch_rows")
                  .Help("Rows per predict call (requests batched together)")
                  .Register(*registry_)
                  .Add({}, row_buckets())),
    examples_(prometheus::BuildCounter()
                .Name("actorps_serve_examples_total")
                .Help("Instances predicted")
                .Register(*registry_)
                .Add({})),
    unknown_keys_(prometheus::BuildCounter()
                    .Name("actorps_serve_unknown_keys_total")
                    .Help("Table lookups of keys the export does not hold "
                          "(answered with the table's default row)")
                    .Register(*registry_)
                    .Add({})),
    version_(prometheus::BuildGauge()
               .Name("actorps_serve_model_version")
               .Help("The model version serving (the checkpoint's global "
                     "step)")
               .Register(*registry_)
               .Add({})),
    loads_(prometheus::BuildCounter()
             .Name("actorps_serve_version_loads_total")
             .Help("Versions tried, by result: loaded or refused (a bad "
                   "checksum, a missing file; the version before keeps "
                   "serving)")
             .Register(*registry_)),
    queued_(prometheus::BuildGauge()
              .Name("actorps_serve_queued_rows")
              .Help("Rows waiting to be batched at the scrape")
              .Register(*registry_)
              .Add({})) {
  loads_.Add({{"result", "loaded"}});
  loads_.Add({{"result", "refused"}});
}

serve_metrics::~serve_metrics() = default;

void serve_metrics::answered(const std::string& endpoint, int code) {
  requests_.Add({{"endpoint", endpoint}, {"code", std::to_string(code)}})
    .Increment();
  if (code >= 400)
    errors_.Add({{"endpoint", endpoint}}).Increment();
}

void serve_metrics::latency(double seconds) {
  latency_.Observe(seconds);
}

void serve_metrics::batch(uint64_t rows) {
  batch_rows_.Observe(static_cast<double>(rows));
  examples_.Increment(static_cast<double>(rows));
}

void serve_metrics::loaded(uint64_t version, const std::string& error) {
  loads_.Add({{"result", error.empty() ? "loaded" : "refused"}}).Increment();
  if (error.empty())
    version_.Set(static_cast<double>(version));
}

void serve_metrics::watch_queue(std::function<uint64_t()> queued_rows) {
  std::lock_guard<std::mutex> guard{mtx_};
  queued_rows_ = std::move(queued_rows);
}

std::string serve_metrics::scrape() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto unknown = counters_.unknown_keys.load(std::memory_order_relaxed);
    if (unknown > seen_unknown_)
      unknown_keys_.Increment(static_cast<double>(unknown - seen_unknown_));
    seen_unknown_ = unknown;
    if (queued_rows_)
      queued_.Set(static_cast<double>(queued_rows_()));
  }
  prometheus::TextSerializer text;
  return text.Serialize(registry_->Collect());
}

} // namespace actorps
