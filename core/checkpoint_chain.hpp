#pragma once

// Chains of checkpoints (core/checkpoint.hpp): a full checkpoint followed by
// delta checkpoints, each naming its base. Finding a chain from its newest
// member, replaying it into one whole state, and the chain-aware retention.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"
#include "core/checkpoint_manifest.hpp"

namespace actorps::detail {

/// One member of a chain: its directory and its manifest, read.
struct chain_link {
  std::string dir;
  decoded_manifest manifest;
};

/// The chain that ends at checkpoint `dir`: its full checkpoint first, then
/// each delta in order, `dir` last (one link for a full checkpoint). Reads
/// the manifests only; the shard files are read_checkpoint's.
/// @throws input_error naming the checkpoint whose base is wrong and what
///         is wrong: "ROOT/ckpt-0000000300: delta of ckpt-0000000200, which
///         is missing (a broken chain; nothing is restored from it)", a base
///         of another id (it was replaced), a base that is not older, or a
///         manifest that does not read (its own message).
std::vector<chain_link> resolve_chain(const std::string& dir);

/// Replays a chain into one whole state: the full checkpoint's state, then
/// each delta applied in order (progress and dense shards replaced, table
/// shards replayed with table_store::apply_delta, or replaced by a whole
/// table shard). Memory: every table row once, in table_stores (their
/// index and change tracking included), plus the delta being applied.
class checkpoint_replay {
public:
  /// Starts from the full checkpoint `full`, read from `dir`.
  checkpoint_replay(checkpoint_state full, std::string dir);

  ~checkpoint_replay();

  /// Applies the delta `delta`, read from `dir`.
  /// @throws input_error "DIR/manifest.json: WHAT" if its shards or job do
  ///         not match the state so far; the replay must then be dropped.
  void apply(checkpoint_state delta, const std::string& dir);

  /// The whole state: table shards with every row (in the stores' order),
  /// `delta` false, the id of the last checkpoint applied.
  checkpoint_state finish() &&;

private:
  struct table;
  checkpoint_state st_;
  std::string dir_;
  /// One per shard of st_ (null for a dense one).
  std::vector<std::unique_ptr<table>> tables_;
};

/// Removes every ".tmp-" directory in `root` and every complete checkpoint
/// that is not in the chains of `written` (a name in `root`) or of the
/// newest `keep` - 1 other full checkpoints: a full one goes with its
/// deltas, and a kept delta's base is never removed. A checkpoint whose
/// manifest does not read counts as a full one; a delta whose chain is
/// broken is removed once it is older than the oldest full one kept.
/// Deltas go before their base (newest first), so that a crash halfway
/// leaves no delta without its base. Best effort: what cannot be removed is
/// logged as a warning and left there.
void prune_chains(const std::string& root, const std::string& written,
                  uint32_t keep, uint64_t step);

/// A fresh nonzero random checkpoint id.
uint64_t new_checkpoint_id();

} // namespace actorps::detail
