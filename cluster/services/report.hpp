#pragma once

// How a training job reports: epoch lines and the summary for people, JSON
// lines for programs (cluster/services/train_report.hpp).

#include <cstdio>
#include <fstream>
#include <string>

#include "cluster/services/train_report.hpp"

namespace actorps {

struct job_config;

/// A JSON-lines file written under a temporary name (PATH.tmp) and renamed
/// to PATH on commit(); without commit() (a failed run) the temporary file
/// is removed and an older PATH stays as it was.
class metrics_file {
public:
  /// @param path  "" = write nothing.
  /// @throws input_error if PATH.tmp cannot be written.
  explicit metrics_file(std::string path);

  ~metrics_file();

  metrics_file(const metrics_file&) = delete;
  metrics_file& operator=(const metrics_file&) = delete;

  /// Writes one epoch's object.
  void write_epoch(const epoch_metrics& m);

  /// Writes one progressive window's object: {"type": "window", "window",
  /// "first_example", "examples", "progressive_loss", "progressive_auc"}.
  void write_window(const window_metrics& w);

  /// Writes the final object (with "staleness_buckets", the buckets' labels,
  /// and "staleness_histogram", this run's pushes per bucket).
  void write_final(const train_report& r, const job_config& cfg,
                   double elapsed_s);

  /// @throws runtime_failure if the file cannot be completed or renamed.
  void commit();

private:
  void write_line(const std::string& line);

  std::string path_;
  std::string tmp_;
  std::ofstream out_;
  bool committed_ = false;
};

/// Redraws the progress bar of epoch `epoch` on `out` ("\r...").
void draw_progress(std::FILE* out, uint32_t epoch, uint32_t epochs,
                   uint64_t done, uint64_t total, double elapsed);

/// Prints one epoch line: "epoch   1/10  train_loss 0.5482  test_loss 0.4572
/// test_accuracy 0.8299  samples/s 120621  elapsed 0.9s" (the model's test
/// metrics in its order).
void print_epoch(std::FILE* out, const epoch_metrics& m, uint32_t epochs);

/// Prints the summary: final metrics, staleness (mean, max, and a line with
/// the histogram: "staleness histogram (pushes by staleness): 0: 812, 1: 95,
/// 2: 12, 3-4: 1"), time shares, closure and
/// push accounting (this run's; for a resumed run the job's beside them:
/// "closures: 936 scheduled, 936 finished, 0 re-executed; pushes: 1872
/// applied, 0 discarded as duplicates (this run; since the start of the job:
/// 1872 closures, 3744 pushes)"), for models with tables the traffic per
/// step, and the peak resident memory of each role's process ("memory: peak
/// RSS coordinator 120 MB, ps0 80 MB, worker0 95 MB"; in one process, the
/// process's).
void print_summary(std::FILE* out, const train_report& r);

} // namespace actorps
