#pragma once

#include <cstdint>
#include <vector>

#include "caf/error.hpp"

#include "actors/messages.hpp"
#include "core/placement.hpp"
#include "core/table_lookup.hpp"

namespace actorps {

/// Routes the unique keys of one batch's table lookups to the parameter
/// servers that hold them, and the pulled rows and pushed row gradients back
/// and forth: a worker's bookkeeping between table_lookup (the model's view)
/// and table_rows (the wire's). Every key of a table goes to the shard
/// placement::shard_id_of_key names; a server gets one table_rows per shard
/// it holds that the batch touches, keys in the order of the lookup's unique
/// keys. Buffers are reused from step to step. Not thread-safe.
class key_routes {
public:
  key_routes() = default;

  key_routes(const placement& pl, uint32_t servers);

  /// Groups each table's unique keys (tables[i].keys) by shard.
  /// @pre every table's variable is a table of `pl` with `dim` set, each
  ///      table variable has at most one lookup (model.hpp promises one per
  ///      table), and the keys of each lookup are unique (deduplicate()).
  void route(const placement& pl, const std::vector<table_lookup>& tables);

  /// True if the batch touches a table shard of server `p`.
  bool has_keys(uint32_t p) const {
    return used_[p] > 0;
  }

  /// The table part of server `p`'s pull request: per shard, its keys.
  void fill_pull(uint32_t p, std::vector<table_rows>& out) const;

  /// Copies the rows of server `p`'s pull reply (answering fill_pull's
  /// request, in order) into the lookups' `rows`.
  /// @returns errc::bad_message if the reply does not answer the request
  ///          (other shards, or not keys x dim floats); nothing is trusted
  ///          from a reply that does not fit.
  caf::error scatter_pull(uint32_t p, const std::vector<table_rows>& reply,
                          std::vector<table_lookup>& tables) const;

  /// The table part of server `p`'s push: per shard, its keys and their row
  /// gradients (from the lookups' `grad`).
  void fill_push(uint32_t p, const std::vector<table_lookup>& tables,
                 std::vector<table_rows>& out) const;

private:
  struct entry {
    uint32_t shard = 0;
    uint32_t table = 0; ///< index into the tables vector
    std::vector<uint64_t> keys;
    std::vector<uint32_t> positions; ///< each key's row in the lookup
  };

  /// Per server: its entries (the first used_[p] are this step's).
  std::vector<std::vector<entry>> per_ps_;
  std::vector<size_t> used_;
  /// Per shard id: its entry's index in per_ps_[ps] this step, or -1.
  std::vector<int64_t> entry_of_shard_;
};

/// Payload bytes of a pull reply or push: floats and keys, without headers.
uint64_t payload_bytes(const pull_reply& x);
uint64_t payload_bytes(const push_request& x);

} // namespace actorps
