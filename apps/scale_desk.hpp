#pragma once

// The desk of `actorps scale` inside `actorps launch`: a Unix socket in a
// private folder (0700) of the user who runs the job, whose permissions are
// the authentication (plus the peer's uid, SO_PEERCRED), as for the job
// secret; no network port and no credential of its own. It takes one
// command at a time and answers when it is done:
// - workers N: starts `actorps node --role worker --join` processes with
//   the next indices (each with a certificate of the job's CA) or sends
//   SIGTERM (a graceful leave) to the highest indices in service;
// - ps M / leave_ps N: brings idle servers in (`join:ps`, servers launch
//   started up to cluster.max_ps) or drains servers (`leave:ps:N`), by a
//   line on the coordinator's stdin (cluster/services/scale_input.hpp).
// Requests and answers are one JSON object per line (docs/guide/elasticity.md).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/launch/child_process.hpp"
#include "cluster/launch/launcher.hpp"

namespace actorps {

/// What the desk knows of the job it scales.
struct scale_desk_options {
  /// data.sharding: workers join only a job of dynamic shards.
  std::string sharding;
  /// training.mode: workers join and leave only under async.
  std::string mode;
  /// Workers at the start (indices 0 .. workers-1).
  uint32_t workers = 0;
  /// Servers serving at the start (cluster.ps) and started in all
  /// (cluster.max_ps or the plan's joins): ps .. servers-1 wait idle.
  uint32_t ps = 0;
  uint32_t servers = 0;
  /// The process of a worker that joins with `index`; may throw.
  std::function<child_spec(uint32_t index)> new_worker;
  /// How long a command may take before it is answered as failed.
  std::chrono::seconds deadline{120};
};

/// The launch_control of run_children that serves actorps scale.
class scale_desk : public launch_control {
public:
  /// Makes the folder and listens. @throws runtime_failure if it cannot.
  explicit scale_desk(scale_desk_options opts);
  ~scale_desk() override;

  scale_desk(const scale_desk&) = delete;
  scale_desk& operator=(const scale_desk&) = delete;

  /// The socket, for `actorps scale --socket PATH`.
  const std::string& socket_path() const {
    return path_;
  }

  int fd() const override;
  void readable(child_control& ctl) override;
  void line(child_control& ctl, const std::string& name,
            std::string_view line) override;
  void exited(child_control& ctl, const std::string& name,
              int wait_status) override;
  void tick(child_control& ctl) override;

private:
  /// The command that runs: what it waits for.
  struct running_command {
    std::string what;
    detail::unique_fd client;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point deadline;
    /// "worker N joined" lines of the coordinator, by worker index.
    std::set<uint32_t> worker_joins;
    /// Servers joining, by index: done at "rebalanced onto psN:" or "ps N:
    /// no group to spare" (the groups it takes have moved).
    std::set<uint32_t> server_joins;
    /// Children that must exit (a leave).
    std::set<std::string> exits;
    std::vector<std::string> failures;
  };

  /// Answers one request: refused (a string) or started (running_).
  std::optional<std::string> handle(child_control& ctl,
                                    const std::string& request,
                                    detail::unique_fd& client);
  std::optional<std::string> scale_workers(child_control& ctl, uint32_t n);
  std::optional<std::string> scale_servers(child_control& ctl, uint32_t m);
  std::optional<std::string> leave_server(child_control& ctl, uint32_t p);
  std::vector<uint32_t> workers_in_service(child_control& ctl) const;
  /// Ends the running command if nothing is awaited any more.
  void finish_if_done(child_control& ctl);
  static void answer(int fd, const std::string& state,
                     const std::string& message);

  scale_desk_options opts_;
  std::string dir_;
  std::string path_;
  detail::unique_fd listener_;
  /// Every worker index started (the job's and those that joined), and
  /// those told to leave.
  std::set<uint32_t> workers_;
  std::set<uint32_t> leaving_;
  uint32_t next_worker_ = 0;
  /// Servers in service; the next idle one to bring in.
  std::set<uint32_t> servers_;
  uint32_t next_server_ = 0;
  std::optional<running_command> running_;
};

} // namespace actorps
