// A test tool that plays an admitted but misbehaving peer (test/authz_test.sh):
// it dials a node with a certificate of the cluster, sends what its identity
// may not send, before and after its hello, and prints one line per message
// with what came back ("refused: ..." or "answered ..."). It judges nothing:
// the test reads its lines and the node's log.
//
// usage: actorps_peer_probe [join] CONFIG TRAIN_LIMIT WORKERS PS CERT_DIR ROLE
//        INDEX HOST:PORT TARGET_ROLE TARGET_INDEX
//        actorps_peer_probe flood HOST:PORT SECONDS RATE [slow]
//        actorps_peer_probe secret HOST:PORT [SECRET_FILE]
// The job's fingerprint is made from CONFIG with TRAIN_LIMIT and the
// cluster's size, as the nodes' (their spec has WORKERS workers, PS ps).
// `join` only dials and says hello, and prints how long that took in ms;
// `flood` opens RATE silent TCP connections per second for SECONDS, each
// kept open for 2 s (as a flooder reopening what the gate closes); with
// `slow`, each sends the 5-byte header of a TLS handshake record announcing
// 512 bytes and then nothing (a slow peer, not a silent one).
// `secret` dials a node without TLS as a BASP peer, with the job secret of
// SECRET_FILE or none (test/secret_test.sh), and prints "admitted" (exit 0)
// or "refused: REASON" (exit 1).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/after.hpp"
#include "caf/scoped_actor.hpp"

#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "cluster/net/data_frame.hpp"
#include "cluster/net/data_link.hpp"
#include "cluster/net/shm_segment.hpp"
#include "cluster/net/shm_offer.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/gate_io.hpp"
#include "cluster/net/job_secret.hpp"
#include "cluster/net/tls_channel.hpp"
#include "cluster/net/handshake.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/topology/node_actor.hpp"
#include "cluster/topology/remote_cluster.hpp"
#include "cluster/job/system_config.hpp"
#include "cluster/net/tls.hpp"
#include "cluster/topology/trainer.hpp"
#include "core/data_registry.hpp"
#include "core/job_config.hpp"
#include "models/registry.hpp"

using namespace actorps;
using namespace std::chrono_literals;

namespace {

/// Sends a request and prints what came back as NAME: answered | refused.
template <class T, class Handle, class... Ts>
void ask(caf::scoped_actor& self, const char* name, const Handle& dest,
         Ts&&... xs) {
  std::string line;
  self->request(dest, 5s, std::forward<Ts>(xs)...)
    .receive([&](T&) { line = "answered"; },
             [&](caf::error& err) {
               line = "refused: " + self->system().render(err);
             });
  std::printf("%s: %s\n", name, line.c_str());
  std::fflush(stdout);
}

/// A line of /proc/PEER_PID/status ("VmHWM", "Threads") as a number, if
/// PEER_PID names the node's process; 0 otherwise.
uint64_t node_status(const char* field) {
  const char* pid = std::getenv("PEER_PID");
  if (pid == nullptr)
    return 0;
  std::FILE* f = std::fopen(fmt::format("/proc/{}/status", pid).c_str(), "r");
  if (f == nullptr)
    return 0;
  char line[256];
  uint64_t value = 0;
  auto format = fmt::format("{}: %lu", field);
  while (std::fgets(line, sizeof(line), f) != nullptr)
    if (std::sscanf(line, format.c_str(), &value) == 1)
      break;
  std::fclose(f);
  return value;
}

/// The node's threads now.
int node_threads() {
  return static_cast<int>(node_status("Threads"));
}

/// `flood HOST:PORT SECONDS RATE [slow]` (see above).
int flood(const host_port& where, double seconds, double rate, bool slow) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(where.port);
  ::inet_pton(AF_INET, where.host.c_str(), &addr.sin_addr);
  using clock = std::chrono::steady_clock;
  std::deque<std::pair<clock::time_point, int>> open;
  auto start = clock::now();
  auto end = start + std::chrono::duration_cast<clock::duration>(
                       std::chrono::duration<double>(seconds));
  uint64_t made = 0;
  uint64_t failed = 0;
  while (clock::now() < end) {
    auto due = static_cast<uint64_t>(
      std::chrono::duration<double>(clock::now() - start).count() * rate);
    for (; made < due; ++made) {
      int fd = ::socket(AF_INET, SOCK_STREAM | (slow ? 0 : SOCK_NONBLOCK), 0);
      if (fd < 0) {
        ++failed;
        continue;
      }
      auto rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr),
                          sizeof(addr));
      if (slow) {
        // A TLS handshake record header (type 22, TLS 1.0, 512 bytes).
        const unsigned char header[5] = {0x16, 0x03, 0x01, 0x02, 0x00};
        if (rc != 0 || ::send(fd, header, sizeof(header), MSG_NOSIGNAL) != 5)
          ++failed;
      }
      open.emplace_back(clock::now(), fd);
    }
    while (!open.empty() && clock::now() - open.front().first > 2s) {
      ::close(open.front().second);
      open.pop_front();
    }
    std::this_thread::sleep_for(1ms);
  }
  for (auto& [t, fd] : open)
    ::close(fd);
  std::printf("flood: %llu %s connections in %.1f s (%llu sockets "
              "failed)\n",
              static_cast<unsigned long long>(made),
              slow ? "slow" : "silent", seconds,
              static_cast<unsigned long long>(failed));
  return 0;
}

/// `secret HOST:PORT [SECRET_FILE]` (see above).
int prove_secret(const host_port& where, const char* file) {
  std::shared_ptr<const job_secret> secret;
  try {
    if (file != nullptr)
      secret = job_secret::load(file);
  } catch (const std::exception& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
  dial_result out;
  auto ch = detail::open_channel(where, std::chrono::steady_clock::now() + 10s,
                                 nullptr, nullptr, channel_basp, out, secret);
  std::printf("%s\n", ch ? "admitted" : ("refused: " + out.error).c_str());
  return ch ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
  if ((argc == 3 || argc == 4) && std::string{argv[1]} == "secret")
    return prove_secret(parse_host_port(argv[2]),
                        argc == 4 ? argv[3] : nullptr);
  if ((argc == 5 || argc == 6) && std::string{argv[1]} == "flood")
    return flood(parse_host_port(argv[2]), std::stod(argv[3]),
                 std::stod(argv[4]),
                 argc == 6 && std::string{argv[5]} == "slow");
  bool join_only = argc == 12 && std::string{argv[1]} == "join";
  if (join_only) {
    --argc;
    ++argv;
  }
  if (argc != 11) {
    std::fprintf(stderr, "usage: %s CONFIG TRAIN_LIMIT WORKERS PS CERT_DIR "
                         "ROLE INDEX HOST:PORT TARGET_ROLE TARGET_INDEX\n",
                 argv[0]);
    return 2;
  }
  auto cfg = load_job_config(argv[1]);
  cfg.train_limit = std::stoull(argv[2]);
  cfg.workers = static_cast<uint32_t>(std::stoul(argv[3]));
  cfg.ps = static_cast<uint32_t>(std::stoul(argv[4]));
  std::string cert_dir = argv[5];
  node_identity me{argv[6], static_cast<uint32_t>(std::stoul(argv[7]))};
  auto where = parse_host_port(argv[8]);
  node_identity target{argv[9], static_cast<uint32_t>(std::stoul(argv[10]))};
  auto tls = tls_context::load(tls_files_in(cert_dir, me));
  auto net = make_model(cfg, open_dataset(cfg)->schema());
  auto layout = job_placement(cfg, *net);
  system_config sys_cfg{1, network_of(cfg)};
  caf::actor_system sys{sys_cfg};
  if (join_only) {
    // Dial (with retries, as a node does) and say hello; print the time.
    auto t0 = std::chrono::steady_clock::now();
    std::vector<cluster_member> them{{target.role, target.index, where}};
    auto hello = make_handshake(cfg, layout, me.role, me.index);
    set_node_tls(tls); // join_members dials with the node's TLS settings
    try {
      join_members(sys, them, hello, caf::actor{}, 30s);
    } catch (const std::exception& e) {
      std::printf("join failed: %s\n", e.what());
      return 1;
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - t0)
                .count();
    std::printf("joined in %lld ms\n", static_cast<long long>(ms));
    return 0;
  }
  auto r = dial(sys, where, 10s, tls.get(), &target);
  if (!r.actor) {
    std::printf("dial: failed: %s\n", r.error.c_str());
    return 1;
  }
  auto node = caf::actor_cast<node_actor>(r.actor);
  caf::scoped_actor self{sys};
  // Before any hello: only hello may be handled.
  ask<uint32_t>(self, "shutdown before hello", node, shutdown_atom_v,
                int32_t{0});
  ask<uint32_t>(self, "ping before hello", node, ping_atom_v);
  self->send(node, kill_atom_v);
  self->send(node, freeze_atom_v, uint64_t{2000});
  self->send(node, fail_atom_v);
  self->send(node, chaos_atom_v, 1.0, -1.0, uint64_t{0});
  // A hello that names a chief, though this is no coordinator.
  auto hello = make_handshake(cfg, layout, me.role, me.index);
  hello.ticket = r.ticket;
  ask<node_welcome>(self, "hello naming a chief", node, hello_atom_v, hello,
                    caf::actor_cast<caf::actor>(self));
  // The same ticket: a hello refused for naming a chief did not redeem it.
  node_welcome welcome;
  std::string line = "answered";
  self->request(node, 5s, hello_atom_v, hello, caf::actor{})
    .receive([&](node_welcome& w) { welcome = std::move(w); },
             [&](caf::error& err) { line = "refused: " + sys.render(err); });
  std::printf("hello: %s\n", line.c_str());
  if (!welcome.role_actor)
    return 1;
  // After the hello: still none of the coordinator's messages.
  ask<uint32_t>(self, "shutdown after hello", node, shutdown_atom_v,
                int32_t{0});
  ask<uint32_t>(self, "ping after hello", node, ping_atom_v);
  self->send(node, kill_atom_v);
  self->send(node, freeze_atom_v, uint64_t{2000});
  if (target.role == "ps") {
    auto ps = caf::actor_cast<ps_actor>(welcome.role_actor);
    ask<ps_stats>(self, "stats", ps, stats_atom_v, uint32_t{0});
    ask<ps_snapshot>(self, "save", ps, save_atom_v, uint32_t{0});
    ask<uint64_t>(self, "restore", ps, restore_atom_v, uint32_t{0},
                  ps_snapshot{});
    ask<bool>(self, "configure", ps, configure_atom_v, replica_config{});
    pull_request other;
    other.worker = me.index + 1;
    ask<pull_reply>(self, "pull as another worker", ps, pull_atom_v, other);
    pull_request own;
    own.worker = me.index;
    ask<pull_reply>(self, "pull as itself", ps, pull_atom_v, own);
    ask<uint32_t>(self, "ps ping", ps, ping_atom_v);
    pull_request outside; // a read outside the clocks (the format probe's)
    outside.worker = no_worker;
    ask<pull_reply>(self, "pull as no worker", ps, pull_atom_v, outside);
    // The same over a data channel (its certificate decides there); then
    // more channels of the same worker until its first one is closed.
    // Links that never close their channels themselves (idle_close 0), as
    // a peer that keeps them open would.
    data_link_options keep{link_transport::tcp};
    auto link1 = open_data_link(sys, ps, where, tls.get(), &target, 10s,
                                "probe 1", keep);
    ask<pull_reply>(self, "data-channel pull as another worker", link1,
                    pull_atom_v, other);
    ask<pull_reply>(self, "data-channel pull as itself", link1, pull_atom_v,
                    own);
    ask<pull_reply>(self, "data-channel pull as no worker", link1,
                    pull_atom_v, outside);
    // More channels of the same worker: past its cap the node closes the
    // oldest (its log says so); a link whose channel was closed with
    // nothing outstanding opens it again at its next request.
    std::vector<ps_actor> more;
    for (int i = 2; i <= 6; ++i) {
      more.push_back(open_data_link(sys, ps, where, tls.get(), &target, 10s,
                                    fmt::format("probe {}", i), keep));
      std::this_thread::sleep_for(200ms);
    }
    ask<pull_reply>(self, "newest data channel pull as itself", more.back(),
                    pull_atom_v, own);
    ask<pull_reply>(self, "first data channel pull after it was closed",
                    link1, pull_atom_v, own);
    // Idle channels: the node closes them after its idle timeout, and
    // their threads end.
    if (cfg.data_idle_timeout_ms > 0) {
      auto before = node_threads();
      std::this_thread::sleep_for(
        std::chrono::milliseconds(cfg.data_idle_timeout_ms) + 3s);
      std::printf("idle data channels: the node's threads %d with them "
                  "open, %d %u ms later\n",
                  before, node_threads(), cfg.data_idle_timeout_ms + 3000);
      ask<pull_reply>(self, "pull after the idle close", link1, pull_atom_v,
                      own);
    }
  }
  // The peak RSS of the node's process (its pid in PEER_PID, if set), in
  // bytes, to show what the raw attacks below cost it.
  auto peak_rss = [] { return node_status("VmHWM") * 1024; };
  auto peak_before = peak_rss();
  // Raw BASP on a connection of its own: one header, then wait up to 5 s
  // for the node to close the connection.
  auto raw_basp = [&](const char* what, unsigned char op, unsigned char len0) {
    dial_result out;
    auto ch = detail::open_channel(where,
                                   std::chrono::steady_clock::now() + 10s,
                                   tls.get(), &target, channel_basp, out);
    if (!ch) {
      std::printf("%s: no connection: %s\n", what, out.error.c_str());
      return false;
    }
    unsigned char header[32] = {0};
    header[0] = op;
    header[4] = len0; // payload length, network byte order
    header[7] = len0 == 0 ? 64 : 0;
    ch->write(reinterpret_cast<const char*>(header), sizeof(header));
    std::string verdict = "still open after 5 s";
    for (int i = 0; i < 50; ++i) {
      pollfd p{ch->fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
      char buf[64];
      size_t got = 0;
      auto st = ch->read(buf, sizeof(buf), got);
      if (st == channel::status::closed || st == channel::status::failed) {
        verdict = "closed by the node";
        break;
      }
    }
    std::printf("%s: %s\n", what, verdict.c_str());
    return true;
  };
  // A client_handshake header that announces 1 GiB (CAF would allocate it
  // on reading the header).
  if (!raw_basp("oversized BASP header", 1, 0x40))
    return 1;
  // A routed_message (64 bytes): it would name its own sending node.
  if (!raw_basp("routed BASP message", 3, 0))
    return 1;
  // A data channel (TCP: no shared memory offered) whose first frame
  // header announces 1 GiB of bulk, a push's, and then nothing.
  if (target.role == "ps") {
    dial_result out2;
    auto data = detail::open_channel(where,
                                     std::chrono::steady_clock::now() + 10s,
                                     tls.get(), &target, channel_data, out2);
    std::string why;
    if (!data
        || offer_shm(*data, 0, std::chrono::steady_clock::now() + 10s, why)
             != nullptr) {
      std::printf("oversized data frame: no data channel: %s\n",
                  out2.error.c_str());
      return 1;
    }
    push_request req;
    req.gradient.values.assign(4, 1.0f);
    auto f = encode(sys, 1, std::move(req));
    // Bulk bytes (offset 24, little-endian): 2^30.
    for (int i = 0; i < 8; ++i)
      f.header[24 + i] = static_cast<char>(i == 3 ? 0x40 : 0);
    data->write(f.header.data(), f.header.size());
    std::string closed = "still open after 5 s";
    for (int i = 0; i < 50; ++i) {
      pollfd p{data->fd(), POLLIN, 0};
      ::poll(&p, 1, 100);
      char buf[64];
      size_t got = 0;
      auto st = data->read(buf, sizeof(buf), got);
      if (st == channel::status::closed || st == channel::status::failed) {
        closed = "closed by the node";
        break;
      }
    }
    std::printf("oversized data frame: %s\n", closed.c_str());
  }
  std::printf("peak RSS of the node during the oversized header and frame: "
              "%llu -> %llu bytes\n",
              static_cast<unsigned long long>(peak_before),
              static_cast<unsigned long long>(peak_rss()));
  // BASP connections under one identity, held open (this process's CAF
  // holds one already) until the node refuses one.
  std::vector<std::unique_ptr<channel>> held;
  std::string last = "none refused after 20";
  for (int i = 0; i < 20; ++i) {
    dial_result r;
    auto c = detail::open_channel(where,
                                  std::chrono::steady_clock::now() + 10s,
                                  tls.get(), &target, channel_basp, r);
    if (!c) {
      last = "refused: " + r.error;
      break;
    }
    held.push_back(std::move(c));
  }
  std::printf("BASP connections: %zu more admitted, then %s\n", held.size(),
              last.c_str());
  held.clear();
  std::printf("done\n");
  return 0;
}
