#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace actorps {

/// `actorps certs --cluster SPEC.json --out DIR [--days N] [--secret]` (or
/// `--ps N --workers M` instead of a spec): makes a cluster CA and a
/// certificate and key per node (cluster/net/certs.hpp), with `--secret` also
/// a job secret DIR/secret (cluster/net/job_secret.hpp), and lists the files. Returns the exit
/// status. @throws input_error for bad flags or an unusable folder.
int run_certs(const std::vector<std::string>& args);

/// A fresh folder of mode 0700 in $TMPDIR (or /tmp) named
/// "actorps-STEM-XXXXXX", removed when launch exits, even killed (SIGKILL
/// runs no destructor): the keys, secrets and sockets it will hold go with
/// it. @throws runtime_failure if it cannot be made.
std::string private_run_dir(const char* stem);

/// Throw-away certificates of one `actorps launch` (a new CA each time) in
/// a private temporary folder, removed with this object.
class launch_certs {
public:
  /// @throws input_error / runtime_failure as make_cluster_certs.
  launch_certs(uint32_t ps, uint32_t workers);
  ~launch_certs();

  launch_certs(const launch_certs&) = delete;
  launch_certs& operator=(const launch_certs&) = delete;

  /// The folder that holds one folder per node.
  const std::string& dir() const {
    return dir_;
  }

  /// The folder of node `name` ("ps0", "worker1", "coordinator"), for that
  /// node's `--tls DIR`: the CA's certificate and the node's own
  /// certificate and key, nothing else. The CA's key stays in dir()/ca,
  /// which no node is given, for workers that join later (add_worker).
  std::string dir_of(const std::string& name) const {
    return dir_ + "/" + name;
  }

  /// Makes the folder of worker `index` (for one that joins the running
  /// job: actorps scale), as the others', and returns it.
  /// @throws input_error / runtime_failure as add_node_certs.
  std::string add_worker(uint32_t index);

private:
  /// Moves NAME.pem and NAME.key into dir()/NAME with the CA's certificate.
  void give_node_folder(const std::string& name);

  std::string dir_;
};

/// The job secret of one `actorps launch --tls off`
/// (cluster/net/job_secret.hpp): 32 fresh random bytes in a file of mode
/// 0600 in a private temporary folder (0700), removed with this object (or,
/// if launch is killed, once it has ended).
class launch_secret {
public:
  /// @throws runtime_failure if the folder or the file cannot be made.
  launch_secret();
  ~launch_secret();

  launch_secret(const launch_secret&) = delete;
  launch_secret& operator=(const launch_secret&) = delete;

  /// The file, for each node's `--secret-file`.
  std::string file() const {
    return dir_ + "/secret";
  }

private:
  std::string dir_;
};

} // namespace actorps
