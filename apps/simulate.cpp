#include "apps/simulate.hpp"

#include <cstdio>
#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "apps/cli.hpp"
#include "cluster/sim/simulator.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

constexpr const char* simulate_usage = R"(usage: actorps simulate [job flags] [simulation flags]

Runs the job's real actors (parameter servers, workers, dispatcher) in one
process under a deterministic scheduler with a virtual clock: messages take
the time the network model gives them, steps the compute time the compute
model gives them; gradients are real.

Which runs are reproducible: with --compute const:TIME or normal:MEAN,SD
(and no --host measured), the same flags and seed give the same run, bit
for bit (the same digest at the end). The default, --compute measured,
times real steps of the model on this machine, and --host measured times
messages here: such a run differs from the next. Its digest line says so
and prints what it measured as flags: the same flags followed by those
(e.g. --compute const:1480123ns) replay it bit for bit. The digest line
of every run says which of the two it is.

Simulation flags:
  --network RATE[,LATENCY]  each node's link and the latency of a message
                            (10gbit,50us; units bit..tbit, ns..s)
  --compute MODEL           measured (default: the median of 7 real steps
                            of the model, timed here; not reproducible),
                            const:TIME or normal:MEAN,SD (e.g. const:2ms,
                            const:1480123ns, normal:2ms,0.5ms)
  --stragglers SHARE:FACTOR this share of the workers computes FACTOR times
                            as long (5%:3x)
  --seed N                  the job's seed (model.seed) and the compute
                            model's (stragglers, normal times)
  --record FILE             write the event order (one delivered message per
                            line)
  --replay FILE             check this run's event order against FILE
  --out FILE                write the report as JSON lines
  --host measured|C:B:F|C:M:B:F
                            all nodes on one host of C cores, a message
                            costing M ns (default 0) plus B ns per byte of
                            CPU at each end, an update F ns per float;
                            measured: this machine's (with --network
                            1000gbit,20us: loopback; not reproducible)
  --workers-per-machine K   K workers on each machine: they share its link
                            and compute one step at a time (K tasks in
                            flight per machine: bounded delay K-1); K must
                            divide --workers; not with --host
  --timing-only             no arithmetic: the workers run a stand-in of a
                            few floats, the network is charged the real
                            model's bytes and the compute model its step
                            time; no test metrics (for 10,000 workers)

Job flags: as for actorps train (see actorps train --help); --workers and
--ps may be large (1000 workers, 32 ps). The fault plan (--fault), replicas
(--replicas) and checkpoints (--checkpoint-dir, --checkpoint-every: kept in
memory, never written) run as in one process, in virtual time.
)";

} // namespace

int run_simulate(const std::vector<std::string>& args) {
  static const std::map<std::string, bool> own = {
    {"--network", true}, {"--compute", true}, {"--stragglers", true},
    {"--record", true},  {"--replay", true},  {"--out", true},
    {"--timing-only", false}, {"--host", true},
    {"--workers-per-machine", true}};
  std::vector<std::pair<std::string, std::string>> extras;
  auto cmd = parse_job_args(args, "simulate", own, extras);
  if (cmd.help) {
    std::fputs(simulate_usage, stdout);
    return 0;
  }
  if (cmd.quiet)
    log::set_level(log::level::warning);
  sim_options opts;
  opts.network = parse_network("10gbit,50us");
  opts.seed = cmd.job.init_seed;
  std::string out;
  std::string stragglers;
  for (auto& [flag, value] : extras) {
    if (flag == "--network")
      opts.network = parse_network(value);
    else if (flag == "--compute")
      opts.compute = parse_compute(value);
    else if (flag == "--stragglers")
      stragglers = value;
    else if (flag == "--record")
      opts.record = value;
    else if (flag == "--replay")
      opts.replay = value;
    else if (flag == "--out")
      out = value;
    else if (flag == "--workers-per-machine")
      opts.workers_per_machine = static_cast<uint32_t>(
        to_count(flag, value, 1, 1u << 20));
    else if (flag == "--timing-only")
      opts.timing_only = true;
    else if (flag == "--host") {
      // The last --host counts, so that the flags a measured run prints
      // can follow its own.
      opts.measure_host = value == "measured";
      if (!opts.measure_host)
        opts.host = parse_host(value);
    }
  }
  if (!stragglers.empty())
    parse_stragglers(stragglers, opts.compute);
  if (!opts.record.empty() && opts.record == opts.replay)
    throw input_error("--record and --replay name the same file");
  for (auto* f : {&cmd.job.push_format, &cmd.job.pull_format})
    if (*f == "auto")
      throw input_error("wire format \"auto\" times real pulls on a real "
                        "network; under simulate name one (fp32, bf16, ...)");
  if (cmd.job.layer_pushes)
    throw input_error("cluster.layer_pushes: the simulator models a step's "
                      "compute as one span before its pushes, so pieces "
                      "sent during it are not modelled; simulate without it");
  if (cmd.job.priority_pulls)
    throw input_error("cluster.priority_pulls: the simulator models a "
                      "step's pull and compute as two spans, so a forward "
                      "pass run during the pull is not modelled; simulate "
                      "without it");
  std::ofstream json;
  if (!out.empty()) {
    json.open(out, std::ios::out | std::ios::trunc);
    if (!json)
      throw input_error(fmt::format("--out {}: cannot write it", out));
  }
  auto report = simulate(cmd.job, opts);
  std::fputs(to_text(report).c_str(), stdout);
  if (json.is_open()) {
    json << to_json_lines(report);
    if (!json)
      throw runtime_failure(fmt::format("--out {}: writing failed", out));
  }
  return 0;
}

} // namespace actorps
