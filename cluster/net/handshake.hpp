#pragma once

// What two actorps nodes tell each other before anything else, and how they
// compare: protocol version, build id and a fingerprint of the job.

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"

namespace actorps {

struct job_config;
struct placement;

/// Version of the actorps wire protocol: the messages of actors/messages.hpp,
/// their fields and meaning. Bumped on every change to any of them
/// (3: the handshake carries a TLS ticket; 4: the data channel, preamble
/// byte 13 and cluster/net/data_frame.hpp; 5: pushes in pieces, push_request's
/// piece and offset, ps_snapshot's partials; 6: a data channel starts
/// with the shared-memory offer, cluster/net/shm_offer.hpp; 8: delta
/// checkpoints, save_atom with a base and a mark, table_snapshot's delta and
/// removed; 9: preamble byte 14, the job-secret flag, and the proofs after
/// the preamble, cluster/net/job_secret.hpp; 10: step_result's links_shm and
/// links_tcp, ps_stats' tables).
inline constexpr uint32_t protocol_version = 10;

/// This binary's build: "actorps VERSION (git REVISION, CAF 0.17.6)". Two
/// nodes of one cluster run the same build.
std::string build_id();

/// The fingerprint of the job `cfg` with its variables placed as `pl`. Every
/// node computes it from its own config; equal fingerprints mean the nodes
/// agree on the model, the variables' shapes, the partitioning, the update
/// rule, the consistency model and the cluster's size.
job_fingerprint make_fingerprint(const job_config& cfg, const placement& pl);

/// Short id of a fingerprint for log lines: 8 hex digits of the CRC-32
/// (zlib) of all its fields.
std::string fingerprint_id(const job_fingerprint& fp);

/// This process's incarnation: a random 64-bit number drawn once per
/// process (never 0), so that a peer meeting a node again can tell a node
/// that was only paused (same incarnation) from one that was restarted.
uint64_t process_incarnation();

/// This node's handshake: protocol_version, build_id(), `role` ("chief",
/// "worker", "ps") and `index`, process_incarnation(), and the job's
/// fingerprint.
handshake make_handshake(const job_config& cfg, const placement& pl,
                         const std::string& role, uint32_t index);

/// What differs between this node's handshake and a peer's, one line per
/// field, naming the nodes so that both sides print the same line:
/// `protocol version: 1 at ps0, 2 at coordinator`, `job model: "mlp
/// 784-256-128-10, ..." at ps0, "mlp 784-64-10, ..." at coordinator`. Role
/// and index are not compared (they differ by design). Long fields are shown around
/// their first difference. Empty when the two nodes may work together.
std::vector<std::string> handshake_differences(const handshake& mine,
                                               const handshake& peer);

/// Joins lines with "; ".
std::string join_lines(const std::vector<std::string>& lines);

} // namespace actorps
