#include "bench/bench_report.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/utsname.h>

#include <fmt/format.h>

#include "caf/config.hpp"

#include "bench/bench_common.hpp"

namespace actorps::bench {

namespace {

using json = nlohmann::json;

json machine() {
  json m;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpu, line))
    if (line.rfind("model name", 0) == 0) {
      m["cpu"] = line.substr(line.find(':') + 2);
      break;
    }
  m["cores"] = std::thread::hardware_concurrency();
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line))
    if (line.rfind("MemTotal:", 0) == 0) {
      m["memory_gib"] = std::round(std::stod(line.substr(9)) / 1048576.0 * 10)
                        / 10;
      break;
    }
  utsname u{};
  if (uname(&u) == 0) {
    m["host"] = u.nodename;
    m["kernel"] = fmt::format("{} {}", u.sysname, u.release);
  }
  m["compiler"] = __VERSION__;
  m["caf"] = fmt::format("{}.{}.{}", CAF_VERSION / 10000,
                         CAF_VERSION / 100 % 100, CAF_VERSION % 100);
  auto now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m["date"] = date;
  return m;
}

/// The point of `kind` matching the others (sparse: keys and rows; dense:
/// floats and workers).
const point* find_point(const std::string& kind, const std::string& op,
                        const std::string& where, const point& like) {
  for (auto& p : points())
    if (p.kind == kind && p.op == op && p.where == where
        && p.floats == like.floats && p.workers == like.workers
        && p.keys == like.keys && p.rows == like.rows)
      return &p;
  return nullptr;
}

/// The limit of a dense transfer: memcpy for an in-process pull, axpy for
/// an in-process push (the SGD apply), raw TCP for both between processes
/// (over BASP or the data channel).
const point* limit_of(const point& p) {
  point like = p;
  like.workers = 1;
  if (p.where == "loopback" || p.where == "data-channel")
    return find_point("limit", "tcp", "loopback", like);
  return find_point("limit", p.op == "pull" ? "memcpy" : "axpy",
                    "in-process", like);
}

json point_json(const point& p) {
  json j{{"op", p.op},
         {"where", p.where},
         {"floats", p.floats},
         {"workers", p.workers},
         {"iterations", p.latencies.size()},
         {"p50_ms", p.pct(0.5) * 1e3},
         {"p90_ms", p.pct(0.9) * 1e3},
         {"gb_per_s", p.floats * 4 / p.pct(0.5) / 1e9}};
  if (p.kind == "transfer")
    if (auto* l = limit_of(p)) {
      j["limit"] = l->op;
      j["limit_p50_ms"] = l->pct(0.5) * 1e3;
      j["x_limit"] = p.pct(0.5) / l->pct(0.5);
    }
  return j;
}

json sparse_json(const point& p) {
  auto p50 = p.pct(0.5);
  json j{{"op", p.op},
         {"where", p.where},
         {"keys", p.keys},
         {"dim", p.keys > 0 ? p.floats / p.keys : 0},
         {"rows", p.rows},
         {"iterations", p.latencies.size()},
         {"p50_ms", p50 * 1e3},
         {"p90_ms", p.pct(0.9) * 1e3},
         {"keys_per_s", p.keys / p50},
         {"bytes_out", p.bytes_out},
         {"bytes_back", p.bytes_back}};
  if (p.kind != "sparse")
    return j;
  point like = p;
  if (auto* l = find_point("sparse-limit", p.op, "in-process", like)) {
    j["limit"] = "hash map";
    j["limit_p50_ms"] = l->pct(0.5) * 1e3;
    j["limit_keys_per_s"] = l->keys / l->pct(0.5);
    j["x_limit"] = p50 / l->pct(0.5);
  }
  if (p.where == "loopback")
    if (auto* t = find_point("sparse-tcp", p.op, "loopback", like)) {
      j["tcp_p50_ms"] = t->pct(0.5) * 1e3;
      j["x_tcp"] = p50 / t->pct(0.5);
    }
  return j;
}

struct target {
  std::string name;
  std::string op;
  std::string where;
  uint64_t floats;
  double ms;
};

const std::vector<target> targets = {
  {"1M-float push between two processes", "push", "loopback", 1u << 20, 2.5},
  {"1M-float push between two processes, data channel", "push",
   "data-channel", 1u << 20, 2.5},
  {"1K-float round trip between two processes (push)", "push", "loopback",
   1024, 0.2},
  {"1M-float push in one process", "push", "in-process", 1u << 20, 0.3},
};

/// "-" or x formatted with `format`.
std::string opt(const json& j, const char* key, const char* format) {
  return j.contains(key) ? fmt::format(format, j[key].get<double>()) : "-";
}

void sparse_section(std::ostringstream& out, const json& r) {
  out << "\n## Sparse pull and push (embedding table, dim 16)\n\n"
         "One table shard of 16-float rows with unbounded 64-bit keys; each "
         "request names N distinct random keys; the ps applies SGD to the "
         "pushed rows. \"warm\": the rows exist before the timed iterations "
         "(one untimed pull of the same keys, in another order, creates "
         "them), so these rows measure lookups, not row creation. \"cold\": "
         "each iteration pulls N keys new to a fresh shard (first touch, "
         "every row created). The limit, measured in the same run: one "
         "thread looking the same keys up in an "
         "`absl::flat_hash_map<uint64_t, uint32_t>` into a row arena "
         "(prefetching ahead, as the ps's table store does) and copying the "
         "rows out (pull) or adding a gradient row into them (push); cold: "
         "inserting them with their initial rows first. \"x limit\" is p50 "
         "/ the limit's p50. Between processes, \"raw TCP\" is the p50 of "
         "the same payload over loopback (keys, and a push's gradient rows, "
         "one way; a pull's rows or 8 bytes back).\n\n"
      << "| op | where | keys | rows | p50 ms | p90 ms | M keys/s | limit p50 "
         "ms | x limit | raw TCP p50 ms |\n"
         "|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& t : r["sparse"])
    out << fmt::format(
      "| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.3g} | {} | {} | {} |\n",
      t["op"].get<std::string>(), t["where"].get<std::string>(),
      count_label(t["keys"].get<uint64_t>()), t["rows"].get<std::string>(),
      t["p50_ms"].get<double>(), t["p90_ms"].get<double>(),
      t["keys_per_s"].get<double>() / 1e6, opt(t, "limit_p50_ms", "{:.3f}"),
      opt(t, "x_limit", "{:.1f}x"), opt(t, "tcp_p50_ms", "{:.3f}"));
}

} // namespace

json make_results(const json& training) {
  json r;
  r["machine"] = machine();
  for (auto key : {"limits", "transfers", "sparse", "sparse_limits"})
    r[key] = json::array();
  for (auto& p : points()) {
    if (p.kind == "limit")
      r["limits"].push_back(point_json(p));
    else if (p.kind == "transfer")
      r["transfers"].push_back(point_json(p));
    else if (p.kind == "sparse")
      r["sparse"].push_back(sparse_json(p));
    else {
      auto j = sparse_json(p);
      j["limit"] = p.kind == "sparse-tcp" ? "tcp" : "hash map";
      r["sparse_limits"].push_back(j);
    }
  }
  r["training"] = training;
  r["targets"] = json::array();
  for (auto& t : targets) {
    point like;
    like.floats = t.floats;
    if (auto* p = find_point("transfer", t.op, t.where, like))
      r["targets"].push_back({{"name", t.name},
                              {"target_ms", t.ms},
                              {"p50_ms", p->pct(0.5) * 1e3},
                              {"met", p->pct(0.5) * 1e3 <= t.ms}});
  }
  return r;
}

std::string markdown(const json& r) {
  std::ostringstream out;
  auto& m = r["machine"];
  out << "# actorps benchmarks\n\n"
      << "Written by `bench/run.sh` (`build/actorps-bench`); numbers in "
         "`bench/results.json`.\n\n"
      << fmt::format("Machine: {}, {} cores, {} GiB, {}; {}; CAF {}; {}.\n\n",
                     m.value("cpu", "?"), m.value("cores", 0),
                     m.value("memory_gib", 0.0), m.value("kernel", "?"),
                     m.value("compiler", "?"), m.value("caf", "?"),
                     m.value("date", "?"));
  out << "## Targets\n\n| target | goal | p50 | met |\n|---|---|---|---|\n";
  for (auto& t : r["targets"])
    out << fmt::format("| {} | ≤ {} ms | {:.3f} ms | {} |\n",
                       t["name"].get<std::string>(),
                       t["target_ms"].get<double>(), t["p50_ms"].get<double>(),
                       t["met"].get<bool>() ? "yes" : "no");
  out << "\n## Pull and push\n\nThe ps applies SGD; \"x limit\" is p50 / the "
         "limit's p50 (in one process: memcpy for a pull, axpy for a push; "
         "between processes: raw TCP over loopback, the same bytes one way "
         "and 8 back).\n\n"
      << "| op | where | floats | workers | p50 ms | p90 ms | GB/s | limit "
         "| limit p50 ms | x limit |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (auto& t : r["transfers"])
    out << fmt::format("| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.2f} | {} | "
                       "{} | {} |\n",
                       t["op"].get<std::string>(), t["where"].get<std::string>(),
                       count_label(t["floats"].get<uint64_t>()),
                       t["workers"].get<int>(), t["p50_ms"].get<double>(),
                       t["p90_ms"].get<double>(), t["gb_per_s"].get<double>(),
                       t.value("limit", "-"), opt(t, "limit_p50_ms", "{:.3f}"),
                       opt(t, "x_limit", "{:.1f}x"));
  sparse_section(out, r);
  out << "\n## Limits\n\n| limit | floats | p50 ms | p90 ms | GB/s |\n"
         "|---|---|---|---|---|\n";
  for (auto& t : r["limits"])
    out << fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.2f} |\n",
                       t["op"].get<std::string>(),
                       count_label(t["floats"].get<uint64_t>()),
                       t["p50_ms"].get<double>(), t["p90_ms"].get<double>(),
                       t["gb_per_s"].get<double>());
  out << "\n## Training (Fashion-MNIST MLP, 2 ps)\n\n"
         "| where | workers | samples/s | test accuracy | compute | pull | "
         "push | wait | mean staleness |\n|---|---|---|---|---|---|---|---|---|\n";
  for (auto& t : r["training"]) {
    if (!t.contains("samples_per_sec")) {
      out << fmt::format("| {} | {} | failed | | | | | | |\n",
                         t["where"].get<std::string>(), t["workers"].get<int>());
      continue;
    }
    auto& s = t["time_share"];
    out << fmt::format("| {} | {} | {:.0f} | {:.4f} | {:.0f}% | {:.0f}% | "
                       "{:.0f}% | {:.0f}% | {:.2f} |\n",
                       t["where"].get<std::string>(), t["workers"].get<int>(),
                       t["samples_per_sec"].get<double>(),
                       t["test_accuracy"].get<double>(),
                       100 * s["compute"].get<double>(),
                       100 * s["pull"].get<double>(),
                       100 * s["push"].get<double>(),
                       100 * s["wait"].get<double>(),
                       t["mean_staleness"].get<double>());
  }
  return out.str();
}

bool write_file(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out)
      return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

int validate(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    fmt::print(stderr, "{}: cannot read\n", path);
    return 1;
  }
  auto r = json::parse(in, nullptr, false);
  std::vector<std::string> problems;
  if (r.is_discarded()) {
    problems.push_back("not valid JSON");
  } else {
    for (auto key :
         {"machine", "limits", "transfers", "sparse", "training", "targets"})
      if (!r.contains(key))
        problems.push_back(fmt::format("no \"{}\"", key));
    if (problems.empty()) {
      if (!r["machine"].contains("cpu") || !r["machine"].contains("cores"))
        problems.push_back("machine: no cpu or cores");
      if (r["transfers"].empty() || r["limits"].empty())
        problems.push_back("no transfers or limits measured");
      if (r["sparse"].empty())
        problems.push_back("no sparse pull or push measured");
      for (auto& t : r["transfers"])
        if (!(t.value("p50_ms", -1.0) > 0) || !t.contains("x_limit"))
          problems.push_back("a transfer without p50_ms > 0 or x_limit");
      for (auto& t : r["sparse"])
        if (!(t.value("p50_ms", -1.0) > 0) || !(t.value("keys_per_s", -1.0) > 0)
            || !t.contains("x_limit"))
          problems.push_back(
            "a sparse row without p50_ms > 0, keys_per_s > 0 or x_limit");
      for (auto& t : r["training"])
        if (!t.contains("samples_per_sec"))
          problems.push_back(fmt::format("training {} with {} workers failed",
                                         t.value("where", "?"),
                                         t.value("workers", 0)));
    }
  }
  for (auto& p : problems)
    fmt::print(stderr, "{}: {}\n", path, p);
  return problems.empty() ? 0 : 1;
}

} // namespace actorps::bench
