// Priority pulls (worker_options::priority_pulls): a worker pulls each
// group's dense values in slices, one per layer, and runs a layer of the
// forward pass as soon as its values are in. The servers' side (slices of
// a region) is checked here too.

#include <atomic>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "caf/send.hpp"
#include "caf/stateful_actor.hpp"
#include "caf/typed_event_based_actor.hpp"

#include "actors/ps_actor.hpp"
#include "actors/ps_forwarding.hpp"
#include "actors/worker_actor.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/wire_format.hpp"
#include "models/forwarding_model.hpp"
#include "test/actor_fixture.hpp"
#include "test/actors/worker_fixture.hpp"

using namespace actorps;

namespace {

job_config two_servers_config() {
  job_config cfg;
  cfg.ps = 2;
  cfg.optimizer = optimizer_config{"adam", 0.01f, {}};
  return cfg;
}

/// Two async servers (Adam) and one worker: an MLP 4-3-2 whose kernels and
/// biases are split over both, so each server's region holds a part of
/// each layer (two slices per pull).
test::small_job two_servers(test::actor_fixture& t, bool priority) {
  return test::small_job{t, two_servers_config(), [&](worker_options& o) {
                           o.priority_pulls = priority;
                           o.min_slice_floats = 1;
                         }};
}

/// Counts what the worker asks of the model.
class stage_spy final : public forwarding_model {
public:
  using forwarding_model::forwarding_model;

  void forward_stage(const model_inputs& in, const example_batch& batch,
                     uint32_t s, model_workspace& ws) const override {
    ++*stages;
    forwarding_model::forward_stage(in, batch, s, ws);
  }

  double loss_and_gradient(const model_inputs& in, const example_batch& batch,
                           float* dense_grad,
                           model_workspace& ws) const override {
    ++*computes;
    return forwarding_model::loss_and_gradient(in, batch, dense_grad, ws);
  }

  std::shared_ptr<std::atomic<int>> stages
    = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> computes
    = std::make_shared<std::atomic<int>>(0);
};

/// A server's stand-in that holds every pull of a slice after the first
/// (offset > 0) until told (release_atom), and passes everything else on.
using gate_actor = ps_actor::extend<caf::reacts_to<release_atom>>;

struct gate_state {
  ps_actor server;
  std::vector<std::function<void()>> held;
  std::shared_ptr<std::atomic<int>> holding
    = std::make_shared<std::atomic<int>>(0);
  static constexpr const char* name = "slice-gate";
};

gate_actor::behavior_type
slice_gate(gate_actor::stateful_pointer<gate_state> self, ps_actor server,
           std::shared_ptr<std::atomic<int>> holding) {
  self->state.server = std::move(server);
  self->state.holding = std::move(holding);
  auto to = [self] { return self->state.server; };
  return ps_forwarding_behavior<gate_actor>(
    self, to,
    [=](pull_atom a, pull_request& x) -> caf::result<pull_reply> {
      if (!x.slice || x.offset == 0)
        return self->delegate(self->state.server, a, std::move(x));
      auto rp = self->make_response_promise<pull_reply>();
      self->state.held.emplace_back([self, rp, a, x]() mutable {
        rp.delegate(self->state.server, a, std::move(x));
      });
      ++*self->state.holding;
      return rp;
    },
    [=](push_atom a, push_request& x) {
      return self->delegate(self->state.server, a, std::move(x));
    },
    [=](release_atom) {
      auto held = std::move(self->state.held);
      self->state.held.clear();
      *self->state.holding -= static_cast<int>(held.size());
      for (auto& f : held)
        f();
    });
}

/// two_servers(t, true) with a gate in front of each server and a spy
/// around the model.
struct gated_job {
  job_config cfg = two_servers_config();
  std::shared_ptr<const dataset> data = test::tiny_data();
  std::shared_ptr<stage_spy> spy;
  std::shared_ptr<const placement> layout;
  std::vector<ps_actor> servers;
  std::vector<gate_actor> gates;
  std::vector<std::shared_ptr<std::atomic<int>>> holding;
  worker_actor worker;

  explicit gated_job(test::actor_fixture& t) {
    cfg.layers = {4, 3, 2};
    cfg.workers = 1;
    spy = std::make_shared<stage_spy>(make_model(cfg, data->schema));
    layout = std::make_shared<const placement>(job_placement(cfg, *spy));
    std::vector<ps_actor> fronts;
    for (uint32_t i = 0; i < cfg.ps; ++i) {
      servers.push_back(t.keep(spawn_ps(t.sys, ps_options_of(cfg, i))));
      holding.push_back(std::make_shared<std::atomic<int>>(0));
      gates.push_back(
        t.keep(t.sys.spawn(slice_gate, servers.back(), holding.back())));
      fronts.push_back(caf::actor_cast<ps_actor>(gates.back()));
    }
    create_variables(t.sys, *layout, servers, cfg, *spy);
    auto opts = test::worker_options_on(fronts, spy, data, layout);
    opts.priority_pulls = true;
    opts.min_slice_floats = 1;
    worker = t.keep(spawn_worker(t.sys, std::move(opts)));
  }

  /// Whether gate `g` holds `n` pulls.
  bool holds(uint32_t g, int n) const {
    return holding[g]->load() == n;
  }

  /// Sends closure `c` and waits until both gates hold its second slices
  /// and layer 0 has run; returns the closure's pending reply.
  auto start_held(test::actor_fixture& t, uint64_t c) {
    auto closure = t.self->request(worker, test::reply_timeout, run_atom_v,
                                   closure_request{c, train_step_name});
    REQUIRE(test::actor_fixture::eventually(
      [&] { return holds(0, 1) && holds(1, 1); }));
    REQUIRE(test::actor_fixture::eventually(
      [&] { return spy->stages->load() == 1; }));
    return closure;
  }

  /// Checks that the servers hold what `reference`'s hold.
  void check_values(test::actor_fixture& t, test::small_job& reference) {
    for (uint32_t p = 0; p < 2; ++p)
      CHECK(reference.values(t, p)
            == test::small_job::values_of(t, servers[p], p));
  }
};

} // namespace

TEST_CASE("with priority pulls, a worker pulls each layer as a slice, runs "
          "the first layer before the last values arrive, and computes what "
          "whole pulls give",
          "[worker][slices]") {
  test::actor_fixture t{false};
  auto whole = two_servers(t, false);
  auto sliced = two_servers(t, true);
  for (uint64_t c = 1; c <= 6; ++c) {
    auto a = whole.run(t, c);
    auto b = sliced.run(t, c);
    CHECK(b.loss == a.loss);
    CHECK(b.bytes_pulled == a.bytes_pulled);
    CHECK(a.early_stages == 0);
    // A server answers its slices in order, so the last part to arrive is
    // a second layer's: the first layer always ran before it.
    CHECK(b.early_stages == 1);
  }
  for (uint32_t p = 0; p < 2; ++p) {
    CHECK(sliced.values(t, p) == whole.values(t, p));
    CHECK(sliced.stats(t, p).pushes == 6);
  }
}

TEST_CASE("with priority pulls, the first layer runs while the second "
          "layer's values are held, and the step ends once they come",
          "[worker][slices]") {
  test::actor_fixture t{false};
  auto reference = two_servers(t, false);
  auto expected = reference.run(t, 1);
  gated_job job{t};
  auto closure = job.start_held(t, 1);
  // Layer 0 ran; nothing else can while the second slices are held.
  CHECK(job.spy->computes->load() == 0);
  for (auto& g : job.gates)
    caf::anon_send(g, release_atom_v);
  closure.receive(
    [&](step_result& r) {
      CHECK(r.loss == expected.loss);
      CHECK(r.early_stages == 1);
    },
    [&](caf::error& err) { FAIL("closure 1 failed: " << t.sys.render(err)); });
  CHECK(job.spy->stages->load() == 1);
  CHECK(job.spy->computes->load() == 1);
  job.check_values(t, reference);
}

TEST_CASE("with priority pulls, a route change sends only the slices not yet "
          "in to the new server, and layers already run are not run again",
          "[worker][slices]") {
  test::actor_fixture t{false};
  auto reference = two_servers(t, false);
  auto first = reference.run(t, 1);
  auto second = reference.run(t, 2);
  gated_job job{t};
  auto closure = job.start_held(t, 1);
  // Group 0 moves to its server itself, past the gate (same view, another
  // server index: as a reconnect would route it).
  caf::anon_send(job.worker, route_atom_v,
                 std::vector<group_route>{group_route{
                   0, 5, 0, caf::actor_cast<caf::strong_actor_ptr>(
                              job.servers[0])}});
  caf::anon_send(job.gates[1], release_atom_v);
  closure.receive(
    [&](step_result& r) {
      CHECK(r.loss == first.loss);
      CHECK(r.early_stages == 1);
    },
    [&](caf::error& err) { FAIL("closure 1 failed: " << t.sys.render(err)); });
  CHECK(job.spy->stages->load() == 1);
  // The old server's answer to the slice it held comes late and is dropped.
  caf::anon_send(job.gates[0], release_atom_v);
  auto closure2 = t.self->request(job.worker, test::reply_timeout,
                                  run_atom_v,
                                  closure_request{2, train_step_name});
  // Group 1 still goes through its gate; group 0 to its server directly.
  REQUIRE(test::actor_fixture::eventually([&] { return job.holds(1, 1); }));
  CHECK(job.holds(0, 0));
  caf::anon_send(job.gates[1], release_atom_v);
  closure2.receive(
    [&](step_result& r) { CHECK(r.loss == second.loss); },
    [&](caf::error& err) { FAIL("closure 2 failed: " << t.sys.render(err)); });
  CHECK(job.spy->stages->load() == 2);
  job.check_values(t, reference);
}

TEST_CASE("with priority pulls and values pulled ahead (prefetch, overlap), "
          "a worker pulls them in slices: prefetch computes what whole "
          "pulls give, overlap's steps are one step staler as without them",
          "[worker][slices]") {
  test::actor_fixture t{false};
  for (bool overlap : {false, true}) {
    INFO((overlap ? "overlap" : "prefetch"));
    auto tune = [&](bool priority) {
      return [=](worker_options& o) {
        o.priority_pulls = priority;
        o.min_slice_floats = 1;
        o.prefetch = !overlap;
        o.overlap = overlap;
      };
    };
    test::small_job whole{t, two_servers_config(), tune(false)};
    test::small_job sliced{t, two_servers_config(), tune(true)};
    uint64_t ahead = 0;
    for (uint64_t c = 1; c <= 6; ++c) {
      auto a = whole.run(t, c);
      auto b = sliced.run(t, c);
      // A lone worker's values pulled right behind its push are those of a
      // pull at its step's start, whole or in slices. (Values pulled ahead
      // wait at most a step or 5 ms, so on a loaded host a step may pull
      // afresh: overlap's values, one push older, then differ.)
      if (!overlap)
        CHECK(b.loss == a.loss);
      ahead += b.pulls_ahead;
      // The first step pulls on its own: layer 0 runs before its end.
      if (c == 1)
        CHECK(b.early_stages == 1);
      CHECK(b.early_stages <= 1);
    }
    CHECK(ahead >= 1);
    uint64_t stale = 0;
    for (uint32_t p = 0; p < 2; ++p) {
      if (!overlap)
        CHECK(sliced.values(t, p) == whole.values(t, p));
      auto stats = sliced.stats(t, p);
      CHECK(stats.pushes == 6);
      stale += stats.staleness_sum;
    }
    // Each group's values taken from a pull ahead make its push one step
    // stale under overlap (the pull went out before that push), none under
    // prefetch.
    CHECK(stale == (overlap ? ahead : 0));
  }
}

TEST_CASE("with priority pulls, a model whose forward pass is one stage is "
          "pulled whole",
          "[worker][slices]") {
  test::actor_fixture t{false};
  // small_job builds an MLP 4-3-2 (two stages); an MLP 4-2 has one.
  job_config cfg = two_servers_config();
  cfg.layers = {4, 2};
  auto data = test::tiny_data();
  auto net = make_model(cfg, data->schema);
  REQUIRE(net->forward_stages().size() == 1);
  auto layout = std::make_shared<const placement>(job_placement(cfg, *net));
  std::vector<step_result> runs[2];
  for (bool priority : {false, true}) {
    std::vector<ps_actor> servers;
    for (uint32_t i = 0; i < cfg.ps; ++i)
      servers.push_back(t.keep(spawn_ps(t.sys, ps_options_of(cfg, i))));
    create_variables(t.sys, *layout, servers, cfg, *net);
    auto opts = test::worker_options_on(servers, net, data, layout);
    opts.priority_pulls = priority;
    auto worker = t.keep(spawn_worker(t.sys, std::move(opts)));
    for (uint64_t c = 1; c <= 3; ++c)
      runs[priority].push_back(test::run_closure(t, worker, c));
  }
  for (size_t i = 0; i < 3; ++i) {
    CHECK(runs[1][i].loss == runs[0][i].loss);
    CHECK(runs[1][i].early_stages == 0);
  }
}

TEST_CASE("with priority pulls, slices below min_slice_floats go with a "
          "neighbour",
          "[worker][slices]") {
  test::actor_fixture t{false};
  // The MLP 4-3-2's layers hold 15 and 8 floats, about half of each on
  // each server: at 8 floats only the second layer's part (4) is small
  // and goes with the first's (7 or 8), so nothing runs early; at 1 both
  // are slices of their own.
  for (uint64_t min_floats : {uint64_t{1}, uint64_t{8}, uint64_t{4096}}) {
    INFO("min_slice_floats " << min_floats);
    test::small_job job{t, two_servers_config(), [&](worker_options& o) {
                          o.priority_pulls = true;
                          o.min_slice_floats = min_floats;
                        }};
    auto r = job.run(t, 1);
    CHECK(r.early_stages == (min_floats == 1 ? 1u : 0u));
  }
}

TEST_CASE("a server answers a pull of a slice of its region with those "
          "floats, in a wire format too, and refuses a slice outside it",
          "[ps][slices]") {
  test::actor_fixture t{false};
  auto job = two_servers(t, false);
  auto all = job.values(t, 0);
  REQUIRE(all.size() >= 4);
  pull_request req;
  req.group = 0;
  req.worker = no_worker;
  req.slice = true;
  req.offset = 1;
  req.count = all.size() - 2;
  auto r = t.ask<pull_reply>(job.servers[0], pull_atom_v, req);
  CHECK(std::vector<float>(r.values.values.begin(), r.values.values.end())
        == std::vector<float>(all.begin() + 1, all.end() - 1));
  req.format = "bf16";
  auto encoded = t.ask<pull_reply>(job.servers[0], pull_atom_v, req);
  CHECK(encoded.format == "bf16");
  CHECK(encoded.values.values.empty());
  auto f = make_wire_format("bf16");
  std::vector<float> decoded(req.count);
  f->decode(encoded.encoded, decoded.data(), decoded.size());
  for (size_t i = 0; i < decoded.size(); ++i)
    CHECK(decoded[i] == Approx(all[i + 1]).epsilon(1.0 / 128));
  req.format.clear();
  struct bad_slice {
    uint64_t offset;
    uint64_t count;
  };
  for (auto [offset, count] :
       {bad_slice{0, 0}, bad_slice{all.size(), 1}, bad_slice{1, all.size()},
        bad_slice{UINT64_MAX - 1, 4}, bad_slice{all.size() + 1, 0}}) {
    INFO("slice at " << offset << " of " << count);
    req.offset = offset;
    req.count = count;
    auto err = t.refusal<pull_reply>(job.servers[0], pull_atom_v, req);
    CHECK(err == errc::bad_message);
  }
}
