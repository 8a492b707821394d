#pragma once

// Pushes in pieces (cluster.layer_pushes): a worker pushes each layer's
// gradient as soon as backpropagation produces it, so one update reaches a
// server as several pushes, each covering a run of the server's dense
// region. The server applies each piece as it comes and counts the update
// once its pieces cover the region. Shared by the primary (ps_actor.cpp)
// and a backup applying its primary's forwards (ps_chain.cpp).

#include <cstdint>

#include "caf/error.hpp"

#include "actors/messages.hpp"
#include "actors/ps_replica.hpp"

namespace actorps {

/// What a piece did to the replica.
enum class piece_outcome {
  duplicate, ///< its update or this piece was applied before: nothing
  part,      ///< applied; the update still lacks pieces
  whole,     ///< applied; the update is complete (its id now applied)
};

struct piece_result {
  piece_outcome outcome = piece_outcome::duplicate;
  /// The update's staleness (given with its first piece).
  uint64_t staleness = 0;
};

/// Applies piece `req` (decoded: req.gradient holds its floats, the run of
/// the dense region from req.offset) and its table rows, once: a piece is
/// named by its update's closure id and its run. The first piece of an
/// update starts a step of the dense region (Adam's t) that every piece of
/// it applies with, and fixes the update's `staleness` (its step scale,
/// ps_options::staleness_aware). Does not touch the clock or the counters.
/// @returns errc::bad_message if the run is empty, leaves the region, or
///          overlaps a run of the same update that is not the same run;
///          nothing is applied then.
caf::expected<piece_result> apply_piece(ps_replica& r, const push_request& req,
                                        const ps_options& opts,
                                        uint64_t staleness, uint32_t ps_index);

/// The replica's partial pushes as one key buffer (ps_snapshot::partials):
/// per update its closure id, step, staleness, floats covered, run count,
/// then (offset, floats) per run.
key_buffer encode_partials(const ps_replica& r);

/// The partial pushes `keys` holds (from encode_partials, sent by a peer),
/// checked against r's dense region.
/// @returns errc::bad_message naming what does not fit the region.
caf::expected<std::map<uint64_t, ps_replica::partial_push>>
decode_partials(const ps_replica& r, const key_buffer& keys,
                uint32_t ps_index);

/// Forgets the partial pushes of closures in [first, watermark) (their
/// closures finished: no piece of them comes any more).
void prune_partials(ps_replica& r, uint64_t first, uint64_t watermark);

} // namespace actorps
