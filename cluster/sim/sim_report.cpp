// The report of `actorps simulate` as JSON lines and as text
// (cluster/sim/simulator.hpp).

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster/sim/simulator.hpp"
#include "core/staleness_histogram.hpp"

namespace actorps {

namespace {

nlohmann::json metrics_json(const metric_list& m) {
  auto j = nlohmann::json::object();
  for (auto& [name, value] : m)
    j[name] = value;
  return j;
}

double mean(const std::vector<double>& xs) {
  return xs.empty() ? 0
                    : std::accumulate(xs.begin(), xs.end(), 0.0)
                        / static_cast<double>(xs.size());
}

} // namespace

std::string to_json_lines(const sim_report& r) {
  std::string out;
  for (auto& e : r.epochs) {
    nlohmann::json j;
    j["type"] = "epoch";
    j["epoch"] = e.epoch;
    j["virtual_s"] = e.virtual_s;
    j["train_loss"] = e.train_loss;
    j["metrics"] = metrics_json(e.metrics);
    out += j.dump() + "\n";
  }
  nlohmann::json s;
  s["type"] = "summary";
  s["workers"] = r.workers;
  s["workers_per_machine"] = r.workers_per_machine;
  s["ps"] = r.ps;
  s["network"] = r.network;
  s["step_ms"] = static_cast<double>(r.step_ns) / 1e6;
  s["samples"] = r.samples;
  s["virtual_s"] = r.virtual_s;
  s["wall_s"] = r.wall_s;
  s["host"] = r.host;
  s["samples_per_s"] = r.samples_per_s;
  auto servers = nlohmann::json::array();
  for (auto& l : r.servers)
    servers.push_back({{"pulls", l.pulls},
                       {"pushes", l.pushes},
                       {"bytes_in", l.bytes_in},
                       {"bytes_out", l.bytes_out},
                       {"utilization", l.utilization}});
  s["servers"] = servers;
  s["idle"] = r.idle;
  s["staleness_buckets"] = r.staleness_buckets;
  s["closures"] = r.closures;
  s["reexecuted"] = r.reexecuted;
  s["pushes_applied"] = r.pushes_applied;
  s["duplicates"] = r.duplicates;
  s["dropped"] = r.dropped;
  s["delayed"] = r.delayed;
  s["events"] = r.events;
  s["digest"] = r.digest;
  s["reproducible"] = r.reproducible;
  s["replay_flags"] = r.replay_flags;
  s["peak_rss_bytes"] = r.peak_rss_bytes;
  out += s.dump() + "\n";
  return out;
}

std::string to_text(const sim_report& r) {
  std::string out = fmt::format(
    "simulated {} workers, {} ps on {} with {:.3f} ms per step: {} samples "
    "in {:.3f} s virtual ({:.0f} samples/s), {:.2f} s wall\n",
    r.workers, r.ps, r.network, static_cast<double>(r.step_ns) / 1e6,
    r.samples, r.virtual_s, r.samples_per_s, r.wall_s);
  if (!r.host.empty())
    out += "  host: " + r.host + "\n";
  if (r.workers_per_machine > 1)
    out += fmt::format("  {} machines of {} workers each (a machine's "
                       "workers share its link and compute one step at a "
                       "time)\n",
                       r.workers / r.workers_per_machine,
                       r.workers_per_machine);
  for (auto& e : r.epochs) {
    out += fmt::format("  epoch {} at {:.3f} s: train loss {:.4f}", e.epoch,
                       e.virtual_s, e.train_loss);
    for (auto& [name, value] : e.metrics)
      out += fmt::format(", {} {:.4f}", name, value);
    out += "\n";
  }
  for (size_t p = 0; p < r.servers.size(); ++p) {
    auto& l = r.servers[p];
    out += fmt::format("  ps {}: {} pulls, {} pushes, {:.1f} MB in, {:.1f} MB "
                       "out, link {:.0f}% busy\n",
                       p, l.pulls, l.pushes, l.bytes_in / 1e6,
                       l.bytes_out / 1e6, l.utilization * 100);
  }
  if (!r.idle.empty())
    out += fmt::format("  {} idle (not computing): mean {:.0f}%, min "
                       "{:.0f}%, max {:.0f}%\n",
                       r.workers_per_machine > 1 ? "machines" : "workers",
                       mean(r.idle) * 100,
                       *std::min_element(r.idle.begin(), r.idle.end()) * 100,
                       *std::max_element(r.idle.begin(), r.idle.end()) * 100);
  if (!r.staleness_buckets.empty())
    out += "  staleness: " + describe_staleness(r.staleness_buckets) + "\n";
  out += fmt::format("  closures: {} finished, {} re-executed; pushes: {} "
                     "applied, {} discarded as duplicates",
                     r.closures, r.reexecuted, r.pushes_applied,
                     r.duplicates);
  if (r.dropped + r.delayed > 0)
    out += fmt::format("; faults: {} pulls and pushes dropped (sent again "
                       "after 200 ms), {} delayed",
                       r.dropped, r.delayed);
  out += "\n";
  if (r.reproducible)
    out += fmt::format("  {} events, digest {} (reproducible: the same flags "
                       "and seed give the same run, bit for bit)\n",
                       r.events, r.digest);
  else
    out += fmt::format("  {} events, digest {} (not reproducible: measured "
                       "on this machine; the same flags followed by {} "
                       "replay this run bit for bit)\n",
                       r.events, r.digest, r.replay_flags);
  return out;
}

} // namespace actorps
