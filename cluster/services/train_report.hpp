#pragma once

// What a training job did (train_report) and how it reports (train_options):
// filled by train() and train_chief() (cluster/topology/trainer.hpp),
// written by the report and the metrics file (cluster/services/report.hpp).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "actors/ps_stats.hpp"
#include "cluster/services/fit.hpp"
#include "core/metrics.hpp"

namespace actorps {

/// What a whole job did.
struct train_report {
  std::vector<epoch_metrics> epochs;
  uint32_t workers = 0;
  uint32_t ps = 0;
  /// Replica groups the variables are placed over (cluster.groups; = ps
  /// by default): every closure pushes once to each.
  uint32_t groups = 0;
  /// Moves of groups between servers (planned moves, a join's rebalancing,
  /// leaves): how many ended, the floats and table rows they carried, and
  /// the longest time pushes to a moving group waited, in ms.
  uint64_t moves = 0;
  uint64_t moved_floats = 0;
  uint64_t moved_table_rows = 0;
  double longest_move_stall_ms = 0;
  /// Floats of the dense variables.
  uint64_t parameters = 0;
  double samples_per_sec = 0; ///< all training examples / all training time
  double mean_staleness = 0;  ///< over every push applied by every server
  uint64_t max_staleness = 0;
  /// Pushes of this run per staleness bucket, summed over the servers
  /// (core/staleness_histogram.hpp; staleness_buckets entries).
  std::vector<uint64_t> staleness_histogram;
  /// The pushes mean_staleness and the histogram are over: those the
  /// servers' processes of this run measured (fewer than `pushes` after a
  /// server was restored: its count of pushes comes back with its
  /// checkpoint, its staleness statistics start again).
  uint64_t staleness_pushes = 0;
  // -- counts of this run --------------------------------------------------------
  // Every closure pushes once to every group, so pushes + updates_lost ==
  // groups x closures, for this run and for the whole job alike.
  uint64_t pushes = 0;        ///< applied in this run, over all servers
  uint64_t closures = 0;      ///< finished in this run
  uint64_t scheduled = 0;     ///< closures scheduled in this run
  uint64_t reexecuted = 0;    ///< extra runs of closures whose worker was lost
  /// "dynamic" when the coordinator handed out the examples of a dataset
  /// (data.sharding), else "" (static slices, or a stream).
  std::string sharding;
  /// Dynamic shards: the examples of this run's epochs' closures, and those
  /// trained exactly as planned (epoch_metrics); equal when every example
  /// was trained once per epoch.
  uint64_t examples_planned = 0;
  uint64_t examples_trained = 0;
  uint64_t duplicates = 0;    ///< pushes discarded as already applied
  /// Pushes of this run rolled back when a parameter server was restored
  /// from a checkpoint (at most one checkpoint interval per recovery).
  uint64_t updates_lost = 0;
  // -- counts since the start of the job (a resumed run adds its own) ----------
  /// Closures the job had finished when this run started: the global step of
  /// the checkpoint it resumed from (0 for a new run, also one started with
  /// restore_variables_only).
  uint64_t start_step = 0;
  uint64_t job_closures = 0;     ///< finished since the start: the global step
  uint64_t job_pushes = 0;       ///< applied since the start (servers' clocks)
  uint64_t job_updates_lost = 0; ///< lost to recoveries since the start
  /// Summed over all steps of all workers, seconds.
  double pull_s = 0;
  double compute_s = 0;
  double push_s = 0;
  /// Worker-seconds of training time in total (workers x training time).
  double worker_s = 0;
  // -- embedding tables ---------------------------------------------------------
  /// Unique table keys pulled (and pushed) by all steps.
  uint64_t keys = 0;
  /// Payload bytes of all steps' pulls and pushes (floats and keys).
  uint64_t bytes_pulled = 0;
  uint64_t bytes_pushed = 0;
  /// Overlap and prefetch: groups whose dense values a step took from the
  /// pull sent with its worker's previous push (at most steps x
  /// dense_groups).
  uint64_t pulls_ahead = 0;
  /// Whether those were sent right behind the push (cluster.prefetch)
  /// rather than before it (cluster.overlap).
  bool prefetch = false;
  /// Between processes, per worker: its data channels through shared memory
  /// and over TCP at its last step (both 0: none reported, e.g. in one
  /// process, or all over BASP).
  std::vector<std::pair<uint32_t, uint32_t>> worker_links;
  /// Pieces of pushes sent during backpropagation (layer pushes).
  uint64_t early_pieces = 0;
  /// Forward stages run while their step's later values were on their way
  /// (priority pulls).
  uint64_t early_stages = 0;
  /// Replica groups (servers) that hold dense values: a step's dense pulls.
  uint32_t dense_groups = 0;
  /// Bytes one step would pull and push if every variable were dense and
  /// moved whole: (dense floats + vocabulary x dim of every fixed-vocabulary
  /// table) x 4, each way (0 if a table has unbounded keys).
  uint64_t dense_equivalent_bytes = 0;
  /// Rows and bytes the servers' table shards hold at the end.
  uint64_t table_rows = 0;
  uint64_t table_bytes = 0;
  /// Admission and eviction over all table shards (ps_stats' fields of the
  /// same names, summed; counted since the servers started).
  uint64_t rows_admitted = 0;
  uint64_t keys_rejected = 0;
  uint64_t gradients_dropped = 0;
  uint64_t evicted_ttl = 0;
  uint64_t evicted_l2 = 0;
  uint64_t evicted_budget = 0;
  /// The same by table (and each table's rows and bytes at the end), in
  /// name order; empty for a job without tables.
  std::vector<table_stats> tables;
  /// Peak resident memory of this process (the coordinator; in one process
  /// every role), bytes.
  uint64_t peak_rss_bytes = 0;
  /// Peak resident memory of each ps's and each worker's process, bytes: a
  /// ps's from its final stats, a worker's the most its step results
  /// reported (0: none reported). Empty in one process, where
  /// peak_rss_bytes is every role's.
  std::vector<uint64_t> ps_peak_rss_bytes;
  std::vector<uint64_t> worker_peak_rss_bytes;
  /// Training time in seconds (without evaluation and checkpoints).
  double train_s = 0;
};

/// How train() reports.
struct train_options {
  /// Where epoch lines and the summary go (nullptr: nowhere).
  std::FILE* out = stdout;
  /// Draw a progress bar with ETA on `out` (meant for a TTY).
  bool progress = false;
  /// Write one JSON object per epoch and a final one to this file ("" =
  /// none). The file is written under a temporary name and renamed on
  /// success only; on failure no file claims a result and an older file of
  /// that name is left as it was.
  std::string metrics_out;
  /// Continue from the checkpoint in this directory ("" = start afresh).
  std::string restore_dir;
  /// Continue from the newest checkpoint in cfg.checkpoint_dir.
  bool resume = false;
  /// With resume: start afresh when cfg.checkpoint_dir holds no checkpoint
  /// yet (a pod or a requeued job that runs the same command every time)
  /// instead of refusing.
  bool resume_if_any = false;
  /// With restore_dir: start a new run from the checkpoint's variables only
  /// (dense values and table rows), as a TensorFlow user fine-tunes: epoch 0,
  /// step 0, fresh data positions, the optimizer's slots and step counts at
  /// their initial values. Only the model, the variables, their partitioning
  /// and the number of ps must match; data, optimizer, consistency mode and
  /// the number of workers may differ. The run's own checkpoints need a
  /// cfg.checkpoint_dir that holds none of another run.
  bool restore_variables_only = false;
  // -- watching a job ---------------------------------------------
  /// Serve Prometheus metrics on this port while the job runs (-1: none; 0:
  /// a free port, logged); see cluster/services/metrics_endpoint.hpp. A node of a
  /// multi-process cluster serves on metrics_port_of(this, ...).
  int metrics_port = -1;
  /// The address the metrics endpoint binds ("" = 127.0.0.1 in one
  /// process, a node's own address from the cluster spec in a cluster;
  /// "0.0.0.0" = every interface).
  std::string metrics_address;
  /// A file whose first line is "USER:PASSWORD": scrapes of the metrics
  /// endpoint must carry them (HTTP basic authentication). "" = none.
  std::string metrics_auth;
  /// A file whose first line is a bearer token scrapes may carry instead
  /// ("Authorization: Bearer TOKEN"). "" = none.
  std::string metrics_token;
  /// "" or "off": plain HTTP; "on": HTTPS with the node's certificate (of
  /// the job's cluster.tls); "mutual": and scrapers show one of its CA.
  std::string metrics_tls;
  /// Write loss and accuracy (or AUC) curves per epoch to this PNG at the
  /// end, with gnuplot ("" = none); see cluster/services/plot.hpp.
  std::string plot;
  /// More fit callbacks (cluster/services/fit.hpp), called after the built-in ones
  /// (epoch lines, faults, metrics file, metrics endpoint, report,
  /// checkpoints) and before the plot's.
  std::vector<std::shared_ptr<fit_callback>> callbacks;
};

} // namespace actorps
