#pragma once

// The counters one parameter server reports (stats requests): a message of
// actors/messages.hpp, kept in a file of its own.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "caf/meta/type_name.hpp"

namespace actorps {

/// One table's admission and eviction on one server (its shards there
/// summed; core/table_store.hpp's table_counts), or over all servers.
struct table_stats {
  std::string variable;        ///< the table's name, as the model has it
  uint64_t rows = 0;           ///< rows held now
  uint64_t bytes = 0;          ///< memory of its shards now (approx.)
  uint64_t admitted = 0;       ///< rows created
  uint64_t rejected = 0;       ///< keys pulled before their admission
  uint64_t gradients_dropped = 0;
  uint64_t evicted_ttl = 0;
  uint64_t evicted_l2 = 0;
  uint64_t evicted_budget = 0;

  /// Adds the counts of `x` (of the same table).
  void add(const table_stats& x) {
    rows += x.rows;
    bytes += x.bytes;
    admitted += x.admitted;
    rejected += x.rejected;
    gradients_dropped += x.gradients_dropped;
    evicted_ttl += x.evicted_ttl;
    evicted_l2 += x.evicted_l2;
    evicted_budget += x.evicted_budget;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, table_stats& x) {
  return f(caf::meta::type_name("actorps::table_stats"), x.variable, x.rows,
           x.bytes, x.admitted, x.rejected, x.gradients_dropped,
           x.evicted_ttl, x.evicted_l2, x.evicted_budget);
}

/// Adds each table of `from` to its entry of `into` (by variable; a table
/// new to `into` is appended), keeping `into` in name order.
inline void add_table_stats(std::vector<table_stats>& into,
                            const std::vector<table_stats>& from) {
  for (auto& t : from) {
    auto i = std::lower_bound(into.begin(), into.end(), t.variable,
                              [](const table_stats& a, const std::string& b) {
                                return a.variable < b;
                              });
    if (i == into.end() || i->variable != t.variable) {
      table_stats fresh;
      fresh.variable = t.variable;
      i = into.insert(i, std::move(fresh));
    }
    i->add(t);
  }
}

/// ps -> anyone: counters of one parameter server.
struct ps_stats {
  uint64_t clock = 0;           ///< updates applied (sync: rounds)
  uint64_t pushes = 0;          ///< pushes accepted (not duplicates)
  uint64_t duplicates = 0;      ///< pushes discarded as already applied
  uint64_t staleness_sum = 0;   ///< sum over applied pushes
  uint64_t staleness_max = 0;   ///< largest staleness seen
  uint64_t floats = 0;          ///< floats in the dense region
  uint64_t shards = 0;          ///< shards held (dense and table)
  uint64_t table_rows = 0;      ///< rows held by all table shards
  uint64_t table_bytes = 0;     ///< memory of the table shards (approx.)
  uint64_t keys_pulled = 0;     ///< table keys read by pulls
  uint64_t keys_pushed = 0;     ///< table rows updated by pushes
  /// The table shards' admission and eviction (core/table_store.hpp's
  /// table_counts, summed): rows created, keys a pull answered without a
  /// row (not admitted yet), gradient rows dropped for them, rows evicted
  /// by time to live, by L2 norm and for the budget, and the admission
  /// filters' bytes (part of table_bytes).
  uint64_t rows_admitted = 0;
  uint64_t keys_rejected = 0;
  uint64_t gradients_dropped = 0;
  uint64_t evicted_ttl = 0;
  uint64_t evicted_l2 = 0;
  uint64_t evicted_budget = 0;
  uint64_t filter_bytes = 0;
  /// The same counts (and rows, bytes) by table, in name order.
  std::vector<table_stats> tables;
  /// Pieces of pushes in pieces applied (cluster.layer_pushes; a push in
  /// pieces counts once in `pushes`, when complete).
  uint64_t pieces = 0;
  /// Peak resident memory of the server's process so far, bytes (in one
  /// process: of the whole job).
  uint64_t peak_rss_bytes = 0;
  /// The group's view at this server and whether it is its primary there
  /// (see replica_config).
  uint64_t view = 0;
  bool primary = true;
  // -- metrics: the staleness histogram ----------------------------
  /// Applied pushes per staleness bucket (core/staleness_histogram.hpp:
  /// staleness_buckets entries once a push was applied; empty before).
  std::vector<uint64_t> staleness_buckets;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ps_stats& x) {
  return f(caf::meta::type_name("actorps::ps_stats"), x.clock, x.pushes,
           x.duplicates, x.staleness_sum, x.staleness_max, x.floats, x.shards,
           x.table_rows, x.table_bytes, x.keys_pulled, x.keys_pushed,
           x.rows_admitted, x.keys_rejected, x.gradients_dropped,
           x.evicted_ttl, x.evicted_l2, x.evicted_budget, x.filter_bytes,
           x.tables, x.pieces, x.peak_rss_bytes, x.view, x.primary,
           x.staleness_buckets); // metrics
}

} // namespace actorps
