#pragma once

// The certificates of a cluster (`actorps certs`, and the throw-away ones
// `actorps launch` makes): a CA of the cluster's own and one certificate
// and key per node, made with OpenSSL's library. See cluster/net/tls.hpp for
// what the subjects say and how nodes check them.

#include <string>
#include <vector>

#include "cluster/spec/cluster_spec.hpp"
#include "cluster/net/tls.hpp"

namespace actorps {

/// Every node of `spec` that talks over the network: the coordinator, each
/// ps and each worker.
std::vector<node_identity> nodes_of(const cluster_spec& spec);

/// Every node of a cluster of `ps` parameter servers and `workers` workers.
std::vector<node_identity> nodes_of(uint32_t ps, uint32_t workers);

/// Makes a new CA and a certificate per node in `dir` (created if missing):
/// ca.pem and ca.key (the CA; its key is needed only to add nodes later:
/// keep it off the nodes), and <node>.pem / <node>.key for each of `nodes`
/// ("coordinator", "ps0", "worker1"). Keys are ECDSA P-256, unencrypted,
/// mode 0600; certificates X.509 v3 signed with SHA-256, valid from an hour
/// ago for `days` days, usable as TLS server and client.
/// @returns the files written.
/// @throws input_error if `dir` holds a ca.pem already (certificates of
///         another cluster) or cannot be written; runtime_failure if
///         OpenSSL fails.
std::vector<std::string> make_cluster_certs(const std::string& dir,
                                            const std::vector<node_identity>& nodes,
                                            int days);

/// Signs a new key and certificate for each of `nodes` with the CA of
/// `ca_dir` (its ca.pem and ca.key, as make_cluster_certs wrote them) and
/// writes <node>.pem / <node>.key into `out_dir` (created if missing), as
/// make_cluster_certs does: e.g. for a worker that joins a running job.
/// @returns the files written.
/// @throws input_error if the CA's files are missing, unreadable or do not
///         match, or `out_dir` cannot be written; runtime_failure if
///         OpenSSL fails.
std::vector<std::string> add_node_certs(const std::string& ca_dir,
                                        const std::string& out_dir,
                                        const std::vector<node_identity>& nodes,
                                        int days);

} // namespace actorps
