// `actorps simulate` end to end on a small job (a9a, sparse logistic
// regression with its weight tables): the same seed gives the same digest,
// another seed another; a recorded run replays; a two-worker run's event
// order is the one the network and compute models give, message by message.

#include "cluster/sim/simulator.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "test/temp_dir.hpp"

using namespace actorps;

namespace {

job_config small_job() {
  auto cfg = load_job_config(ACTORPS_SOURCE_DIR "/configs/a9a.json");
  cfg.data_dir = ACTORPS_SOURCE_DIR "/data/a9a";
  cfg.train_limit = 512;
  cfg.test_limit = 200;
  cfg.epochs = 2;
  cfg.workers = 4;
  cfg.ps = 2;
  return cfg;
}

sim_options constant_compute(uint64_t seed) {
  sim_options o;
  o.network = parse_network("1gbit,100us");
  o.compute = parse_compute("normal:1ms,200us");
  o.seed = seed;
  return o;
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in{path};
  std::vector<std::string> result;
  for (std::string line; std::getline(in, line);)
    result.push_back(line);
  return result;
}

/// One delivered message of a recorded run: its virtual time, kind and
/// worker ("pull> w0") and bytes.
struct event {
  uint64_t t = 0;
  std::string what;
  uint64_t bytes = 0;
};

std::vector<event> events_of(const std::string& path) {
  std::vector<event> e;
  for (auto& line : lines_of(path)) {
    std::istringstream in{line};
    event x;
    std::string worker, ps, closure;
    in >> x.t >> x.what >> worker >> ps >> closure >> x.bytes;
    x.what += " " + worker;
    e.push_back(x);
  }
  return e;
}

/// Two workers, one ps, one step each; a byte takes 1 us on a link, a
/// message 100 us of latency more; each step computes `compute`.
job_config one_step_each(sim_options& o, const std::string& compute) {
  auto cfg = small_job();
  cfg.workers = 2;
  cfg.ps = 1;
  cfg.epochs = 1;
  cfg.train_limit = 128; // one step per worker
  o.network = parse_network("8mbit,100us");
  o.compute = parse_compute(compute);
  return cfg;
}

} // namespace

TEST_CASE("two simulations of one job and seed are identical, another seed "
          "gives another run",
          "[simulate]") {
  auto cfg = small_job();
  auto a = simulate(cfg, constant_compute(7));
  auto b = simulate(cfg, constant_compute(7));
  auto c = simulate(cfg, constant_compute(8));
  CHECK(a.digest.size() == 64);
  CHECK(a.digest == b.digest);
  CHECK(a.events == b.events);
  CHECK(a.virtual_s == b.virtual_s);
  CHECK(a.epochs.back().metrics == b.epochs.back().metrics);
  CHECK(c.digest != a.digest);
  // What every closure did: 512 rows / 4 workers / 64 per batch = 2 steps
  // per worker per epoch: 16 closures, each a pull and a push to each ps.
  CHECK(a.samples == 2 * 4 * 2 * 64);
  CHECK(a.events == 16 * 2 * 4);
  for (auto& s : a.servers) {
    CHECK(s.pulls == 16);
    CHECK(s.pushes == 16);
  }
  CHECK(a.virtual_s > 0);
  CHECK(a.samples_per_s == Approx(a.samples / a.virtual_s));
  REQUIRE(a.epochs.size() == 2);
  CHECK(a.epochs[0].virtual_s < a.epochs[1].virtual_s);
}

TEST_CASE("a simulation with overlap is deterministic too: values pulled "
          "ahead are aged by the virtual clock",
          "[simulate][overlap]") {
  auto cfg = small_job();
  cfg.overlap = true;
  auto a = simulate(cfg, constant_compute(7));
  auto b = simulate(cfg, constant_compute(7));
  CHECK(a.digest == b.digest);
  CHECK(a.events == b.events);
  CHECK(a.epochs.back().metrics == b.epochs.back().metrics);
  // The pulls sent ahead come on top of the closures' own.
  uint64_t pulls = 0;
  for (auto& s : a.servers)
    pulls += s.pulls;
  CHECK(pulls > 16 * 2);
  CHECK(a.digest != simulate(small_job(), constant_compute(7)).digest);
}

TEST_CASE("a recorded simulation replays, and a replay of another run names "
          "the first event that differs",
          "[simulate]") {
  test::temp_dir dir{"simulate"};
  auto cfg = small_job();
  auto rec = constant_compute(7);
  rec.record = dir.file("events.txt");
  auto a = simulate(cfg, rec);
  CHECK(lines_of(rec.record).size() == a.events);
  auto again = constant_compute(7);
  again.replay = rec.record;
  CHECK(simulate(cfg, again).digest == a.digest);
  auto other = constant_compute(9);
  other.replay = rec.record;
  CHECK_THROWS_WITH(simulate(cfg, other),
                    Catch::Contains("differs: recorded"));
}

TEST_CASE("a two-worker simulation delivers its messages in the order and "
          "at the times the models give",
          "[simulate]") {
  test::temp_dir dir{"simulate"};
  sim_options o;
  auto cfg = one_step_each(o, "const:1ms");
  o.record = dir.file("events.txt");
  auto r = simulate(cfg, o);
  auto e = events_of(o.record);
  REQUIRE(e.size() == 8);
  // A byte takes 1 us on a link, a message 100 us of latency more; a link
  // carries one message at a time. Both pulls leave at 0: worker 0's takes
  // the server's incoming link first, worker 1's waits for it. The server
  // answers each at once; each worker computes 1 ms, then pushes; worker
  // 1's push waits for the server's incoming link, busy with worker 0's.
  constexpr uint64_t us = 1000;
  constexpr uint64_t latency = 100 * us;
  std::vector<std::string> order{"pull> w0", "<pull w0", "pull> w1",
                                 "<pull w1", "push> w0", "<push w0",
                                 "push> w1", "<push w1"};
  for (size_t i = 0; i < 8; ++i)
    CHECK(e[i].what == order[i]);
  CHECK(e[0].t == e[0].bytes * us + latency);
  CHECK(e[1].t == e[0].t + e[1].bytes * us + latency);
  CHECK(e[2].t == (e[0].bytes + e[2].bytes) * us + latency);
  CHECK(e[3].t == e[2].t + e[3].bytes * us + latency);
  CHECK(e[4].t == e[1].t + 1000 * us + e[4].bytes * us + latency);
  CHECK(e[5].t == e[4].t + 128 * us + latency);
  auto server_free = e[4].t - latency;
  CHECK(e[6].t
        == std::max(e[3].t + 1000 * us, server_free) + e[6].bytes * us
             + latency);
  CHECK(e[7].t == e[6].t + 128 * us + latency);
  CHECK(e[5].bytes == 128);
  CHECK(r.samples == 2 * 64);
  CHECK(r.virtual_s == Approx(static_cast<double>(e[7].t) / 1e9));
}

TEST_CASE("two workers on one machine compute one step at a time: the "
          "second waits for the first",
          "[simulate][machines]") {
  test::temp_dir dir{"simulate"};
  sim_options o;
  auto cfg = one_step_each(o, "const:5ms");
  o.workers_per_machine = 2;
  o.record = dir.file("events.txt");
  auto r = simulate(cfg, o);
  auto e = events_of(o.record);
  REQUIRE(e.size() == 8);
  // As in the two-worker case above, but worker 1's step starts only when
  // worker 0's has ended (5 ms after worker 0's reply), not when its own
  // reply arrives, since the machine computes one step at a time.
  constexpr uint64_t us = 1000;
  constexpr uint64_t latency = 100 * us;
  std::vector<std::string> order{"pull> w0", "<pull w0", "pull> w1",
                                 "<pull w1", "push> w0", "<push w0",
                                 "push> w1", "<push w1"};
  for (size_t i = 0; i < 8; ++i)
    CHECK(e[i].what == order[i]);
  REQUIRE(e[3].t < e[1].t + 5000 * us); // w1's reply came meanwhile
  CHECK(e[4].t == e[1].t + 5000 * us + e[4].bytes * us + latency);
  CHECK(e[6].t == e[1].t + 10000 * us + e[6].bytes * us + latency);
  REQUIRE(r.workers_per_machine == 2);
  REQUIRE(r.idle.size() == 1); // per machine
  // The machine computed 10 ms of the run.
  CHECK(r.idle[0] == Approx(1.0 - 0.010 / r.virtual_s));
}

TEST_CASE("workers on one machine share its link: a job that only moves "
          "bytes takes about twice as long with two workers per machine",
          "[simulate][machines]") {
  auto cfg = small_job();
  cfg.workers = 4;
  cfg.ps = 4;
  cfg.epochs = 1;
  auto o = constant_compute(7);
  o.network = parse_network("8mbit,1us"); // a byte takes 1 us
  o.compute = parse_compute("const:1us");
  auto alone = simulate(cfg, o);
  o.workers_per_machine = 2;
  auto shared = simulate(cfg, o);
  CHECK(alone.idle.size() == 4);
  CHECK(shared.idle.size() == 2);
  CHECK(shared.samples == alone.samples);
  // Each worker pulls from and pushes to all four servers; four servers'
  // links carry the same bytes either way, but a machine's link carries
  // two workers' bytes instead of one.
  CHECK(shared.virtual_s > 1.5 * alone.virtual_s);
  CHECK(shared.virtual_s < 2.5 * alone.virtual_s);
}

TEST_CASE("workers per machine must divide the workers and do not go with "
          "a host model, the same seed gives the same run",
          "[simulate][machines]") {
  auto cfg = small_job(); // 4 workers
  auto o = constant_compute(7);
  o.workers_per_machine = 3;
  CHECK_THROWS_AS(simulate(cfg, o), input_error);
  CHECK_THROWS_WITH(simulate(cfg, o),
                    Catch::Contains("--workers-per-machine 3: must be at "
                                    "least 1 and divide the 4 workers"));
  o.workers_per_machine = 0;
  CHECK_THROWS_AS(simulate(cfg, o), input_error);
  o.workers_per_machine = 2;
  auto h = o;
  h.host = parse_host("2:0.35:1.2");
  CHECK_THROWS_WITH(simulate(cfg, h), Catch::Contains("use one"));
  auto a = simulate(cfg, o);
  auto b = simulate(cfg, o);
  CHECK(a.digest == b.digest);
  CHECK(a.digest != simulate(cfg, constant_compute(7)).digest);
}
