#pragma once

// What `actorps serve` counts, in Prometheus' text format at GET /metrics
// (prometheus-cpp's registry and serializer, Debian's prometheus-cpp-dev).
// A registry of its own: a serving process trains nothing, so none of the
// training telemetry (actors/telemetry.hpp) is here.
//
//   actorps_serve_requests_total{endpoint, code}  every answer (endpoint:
//        predict, model, metadata, health, metrics, other)
//   actorps_serve_errors_total{endpoint}          answers with code >= 400
//   actorps_serve_request_seconds                 predict latency, from the
//        request's arrival to its answer (histogram, 50 us .. 3.3 s)
//   actorps_serve_batch_rows                      rows per predict call
//        (histogram, 1 .. 4096)
//   actorps_serve_examples_total                  instances predicted
//   actorps_serve_unknown_keys_total              table lookups of keys the
//        export does not hold (they got the table's default row)
//   actorps_serve_model_version                   the version serving
//   actorps_serve_version_loads_total{result}     versions loaded / refused
//   actorps_serve_queued_rows                     rows waiting for a batch

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "models/servable.hpp"

namespace prometheus {
class Registry;
template <class T>
class Family;
class Counter;
class Gauge;
class Histogram;
} // namespace prometheus

namespace actorps {

/// The server's counters. Thread-safe.
class serve_metrics {
public:
  serve_metrics();
  ~serve_metrics();

  serve_metrics(const serve_metrics&) = delete;
  serve_metrics& operator=(const serve_metrics&) = delete;

  /// Counts one answer of `endpoint` with HTTP status `code`.
  void answered(const std::string& endpoint, int code);

  /// Adds one predict request's latency, in seconds.
  void latency(double seconds);

  /// Counts one predict call of `rows` rows.
  void batch(uint64_t rows);

  /// Counts a version tried: loaded (`error` empty; it serves now) or
  /// refused.
  void loaded(uint64_t version, const std::string& error);

  /// Handed to servable::predict: the unknown keys and examples it counts.
  servable_counters& counters() noexcept {
    return counters_;
  }

  /// Where the queued-rows gauge reads from at each scrape.
  void watch_queue(std::function<uint64_t()> queued_rows);

  /// Every metric in Prometheus' text exposition format 0.0.4.
  std::string scrape();

private:
  servable_counters counters_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Histogram& latency_;
  prometheus::Histogram& batch_rows_;
  prometheus::Counter& examples_;
  prometheus::Counter& unknown_keys_;
  prometheus::Gauge& version_;
  prometheus::Family<prometheus::Counter>& loads_;
  prometheus::Gauge& queued_;
  /// Guards the fields below (scrapes run on several HTTP threads).
  std::mutex mtx_;
  std::function<uint64_t()> queued_rows_;
  /// The unknown keys already added to the counter.
  uint64_t seen_unknown_ = 0;
};

} // namespace actorps
