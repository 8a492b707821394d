#include "cluster/sim/sim_host.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/scoped_actor.hpp"
#include "caf/send.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/messages.hpp"
#include "actors/ps_actor.hpp"
#include "cluster/net/data_link.hpp"
#include "cluster/net/gate.hpp"
#include "cluster/net/tls_channel.hpp"
#include "cluster/topology/local_cluster.hpp"
#include "cluster/job/system_config.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/update_rule.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

/// The fastest of 15 runs of `f`, in ns: on a busy machine other programs
/// only ever add to a round trip, so the least is its cost here (the
/// median of 7 made the simulated samples/s vary by half between runs).
template <class F>
double least_ns(F f) {
  double best = 0;
  for (int i = 0; i < 15; ++i) {
    auto t0 = steady_clock::now();
    f();
    auto t = std::chrono::duration<double, std::nano>(steady_clock::now() - t0)
               .count();
    if (i == 0 || t < best)
      best = t;
  }
  return best;
}

template <class F>
double median_ns(F f) {
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    auto t0 = steady_clock::now();
    f();
    t.push_back(
      std::chrono::duration<double, std::nano>(steady_clock::now() - t0)
        .count());
  }
  std::nth_element(t.begin(), t.begin() + 3, t.end());
  return t[3];
}

} // namespace

host_spec measure_host(const job_config& cfg, uint64_t floats) {
  host_spec h;
  h.cores = std::max(1u, std::thread::hardware_concurrency());
  floats = std::max<uint64_t>(floats, 1024);
  // The per-byte cost is the difference of two round trips: with a pull of
  // 256 KB a busy second core's scheduling noise cancelled it out (0 in 3-6
  // of 30 runs beside a busy loop), with 4 MB never (0 of 30).
  auto probe = std::max<uint64_t>(floats, uint64_t{1} << 20);
  // Two actor systems of this process, one serving a small and a large
  // server (of the job's update rule) behind gates on loopback, the other
  // dialling them: the real path of a message (serialization, BASP or the
  // data channel as the job would use, the kernel's socket copies,
  // allocation), on this machine.
  system_config server_cfg{2, network_options{}};
  caf::actor_system server_sys{server_cfg};
  system_config client_cfg{2, network_options{}};
  caf::actor_system client_sys{client_cfg};
  std::vector<ps_actor> servers;
  std::vector<std::unique_ptr<gate>> gates;
  std::vector<ps_actor> remote;
  auto stop = [&] {
    for (auto& r : remote)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    gates.clear();
    for (auto& ps : servers)
      caf::anon_send_exit(ps, caf::exit_reason::user_shutdown);
  };
  auto fail = [&](const std::string& why) {
    stop();
    throw runtime_failure("--host measured: " + why);
  };
  // Index 0 holds 1 float, index 1 `probe` floats.
  for (uint32_t i = 0; i < 2; ++i) {
    auto o = ps_options_of(cfg, i);
    o.mode = consistency::async;
    auto ps = spawn_ps(server_sys, o);
    servers.push_back(ps);
    gates.push_back(std::make_unique<gate>(
      server_sys, host_port{"127.0.0.1", 0},
      caf::actor_cast<caf::strong_actor_ptr>(ps), server_sys.message_types(ps),
      "host probe", nullptr,
      [&server_sys, ps, shm = cfg.transport != "tcp"](std::unique_ptr<channel> ch,
                                                  const std::string& peer) {
        serve_data_channel(server_sys, ps, std::move(ch),
                           "host probe <- " + peer,
                           data_session_options{shm});
      }));
    host_port where{"127.0.0.1", gates.back()->port()};
    auto r = dial(client_sys, where, std::chrono::seconds(10));
    if (!r.actor)
      fail("cannot reach a server on loopback: " + r.error);
    auto handle = caf::actor_cast<ps_actor>(r.actor);
    if (cfg.data_channel) {
      try {
        handle = open_data_link(client_sys, handle, where, nullptr, nullptr,
                                std::chrono::seconds(10), "host probe",
                                data_link_options{parse_link_transport(cfg.transport)});
      } catch (const std::exception& e) {
        fail(e.what());
      }
    }
    remote.push_back(handle);
  }
  caf::scoped_actor self{client_sys};
  auto on_error = [&](const caf::error& err) { fail(client_sys.render(err)); };
  for (uint32_t i = 0; i < 2; ++i) {
    create_shard shard;
    shard.variable = "probe";
    shard.row_end = i == 0 ? 1 : probe;
    shard.cols = 1;
    shard.values.values.assign(shard.row_end, 0.5f);
    self->request(remote[i], std::chrono::seconds(30), create_atom_v, shard)
      .receive([](uint64_t) {}, on_error);
  }
  auto pull = [&](uint32_t i) {
    return least_ns([&] {
      for (int k = 0; k < 5; ++k) {
        pull_request req;
        req.worker = 0;
        self->request(remote[i], std::chrono::seconds(30), pull_atom_v, req)
          .receive([](pull_reply&) {}, on_error);
      }
    }) / 5;
  };
  auto small_rtt = pull(0);
  auto large_rtt = pull(1);
  stop();
  // A round trip is two messages, each costing its sender and receiver
  // the fixed cost and the per-byte cost.
  auto bytes = static_cast<double>(probe * sizeof(float));
  h.ns_per_message = std::max(0.0, small_rtt / 4);
  h.ns_per_byte = std::max(0.0, (large_rtt - small_rtt) / (2 * bytes));
  // The update, timed by itself: as the difference of a push's and a
  // pull's round trip it drowned in their noise (0 in 2 of 5 runs).
  dense_region region{std::shared_ptr<const update_rule>{
    make_update_rule(cfg.optimizer)}};
  std::vector<float> init(floats, 0.1f);
  region.append(init.data(), init.size());
  std::vector<float> grad(floats, 0.01f);
  h.apply_ns_per_float = median_ns([&] { region.apply(grad.data()); })
                         / static_cast<double>(floats);
  return h;
}

std::string to_string(const host_spec& h) {
  if (h.cores == 0)
    return "a machine per node";
  return fmt::format("one host of {} cores; a message costs its sender and "
                     "its receiver {:.1f} us + {:.3f} ns per byte; an update "
                     "{:.3f} ns per float",
                     h.cores, h.ns_per_message / 1e3, h.ns_per_byte,
                     h.apply_ns_per_float);
}

host_spec parse_host(const std::string& text) {
  auto bad = [&](const char* why) {
    return input_error(fmt::format("--host: \"{}\" {} (expected measured, "
                                   "CORES:NS_PER_BYTE:NS_PER_FLOAT or "
                                   "CORES:NS_PER_MESSAGE:NS_PER_BYTE:"
                                   "NS_PER_FLOAT, e.g. 2:0.35:1.2)",
                                   text, why));
  };
  std::vector<std::string> parts{""};
  for (auto c : text)
    if (c == ':')
      parts.emplace_back();
    else
      parts.back() += c;
  if (parts.size() != 3 && parts.size() != 4)
    throw bad("has not three or four fields");
  host_spec h;
  char* end = nullptr;
  auto cores = std::strtoul(parts[0].c_str(), &end, 10);
  if (parts[0].empty() || *end != '\0' || cores == 0 || cores > 4096)
    throw bad("does not start with a number of cores in [1, 4096]");
  h.cores = static_cast<uint32_t>(cores);
  auto number = [&](const std::string& part) {
    char* e = nullptr;
    auto x = std::strtod(part.c_str(), &e);
    if (part.empty() || *e != '\0' || !std::isfinite(x) || x < 0)
      throw bad("has a cost that is not a non-negative number");
    return x;
  };
  size_t i = 1;
  if (parts.size() == 4)
    h.ns_per_message = number(parts[i++]);
  h.ns_per_byte = number(parts[i++]);
  h.apply_ns_per_float = number(parts[i]);
  return h;
}

host_model::host_model(host_spec spec, uint32_t nodes)
  : spec_(spec),
    node_free_(nodes, 0),
    core_free_(spec.cores, 0),
    busy_(nodes, 0) {
  // nop
}

sim_time host_model::run(uint32_t n, sim_time duration, sim_time now) {
  auto core = std::min_element(core_free_.begin(), core_free_.end());
  auto start = std::max({now, node_free_.at(n), *core});
  auto end = start + duration;
  node_free_[n] = end;
  *core = end;
  busy_[n] += duration;
  return end;
}

sim_time host_model::message_cost(uint64_t bytes) const {
  return static_cast<sim_time>(std::ceil(
    spec_.ns_per_message + spec_.ns_per_byte * static_cast<double>(bytes)));
}

sim_time host_model::apply_cost(uint64_t floats) const {
  return static_cast<sim_time>(
    std::ceil(spec_.apply_ns_per_float * static_cast<double>(floats)));
}

} // namespace actorps
