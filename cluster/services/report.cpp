#include "cluster/services/report.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/staleness_histogram.hpp"

namespace actorps {

namespace {

double share(const train_report& r, double x) {
  return r.worker_s > 0 ? x / r.worker_s : 0.0;
}

double wait_s(const train_report& r) {
  return std::max(0.0, r.worker_s - r.pull_s - r.compute_s - r.push_s);
}

std::string human_bytes(double x) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (x >= 1000 && u < 4) {
    x /= 1000;
    ++u;
  }
  return fmt::format("{:.3g} {}", x, units[u]);
}

/// " (this run; since the start of the job: 1872 closures, 3744 pushes)" for
/// a resumed run; "" for a run that started the job.
std::string job_counts(const train_report& r) {
  if (r.start_step == 0)
    return {};
  return fmt::format(" (this run; since the start of the job: {} closures, {} "
                     "pushes{})",
                     r.job_closures, r.job_pushes,
                     r.job_updates_lost == 0
                       ? std::string{}
                       : fmt::format(", {} lost", r.job_updates_lost));
}

/// "peak RSS coordinator 120 MB, ps0 80 MB, ..., worker1 95 MB" when the
/// roles are processes; "peak RSS 300 MB (this process)" in one process.
std::string memory_line(const train_report& r) {
  if (r.ps_peak_rss_bytes.empty() && r.worker_peak_rss_bytes.empty())
    return fmt::format("peak RSS {} (this process)",
                       human_bytes(double(r.peak_rss_bytes)));
  auto text = "peak RSS coordinator " + human_bytes(double(r.peak_rss_bytes));
  auto add = [&](const char* role, const std::vector<uint64_t>& xs) {
    for (size_t i = 0; i < xs.size(); ++i)
      text += fmt::format(", {}{} {}", role, i,
                          xs[i] == 0 ? std::string{"unknown"}
                                     : human_bytes(double(xs[i])));
  };
  add("ps", r.ps_peak_rss_bytes);
  add("worker", r.worker_peak_rss_bytes);
  return text;
}

/// " against X for dense variables (N x less)", or, when moving rows by
/// key costs more than moving the whole variables (tiny tables such as
/// a9a's 123 weights), says so.
std::string dense_comparison(double dense, double moved) {
  if (dense <= 0)
    return {};
  if (dense >= moved)
    return fmt::format(" against {} for dense variables ({:.0f}x less)",
                       human_bytes(dense), dense / moved);
  return fmt::format(" against {} for dense variables (the tables are so "
                     "small that moving them whole would cost {:.1f}x less)",
                     human_bytes(dense), moved / dense);
}

/// The staleness buckets' labels: "0", "1", "2", "3-4", ..., ">128".
std::vector<std::string> staleness_labels() {
  std::vector<std::string> result;
  for (size_t i = 0; i < staleness_buckets; ++i)
    result.push_back(staleness_bucket_label(i));
  return result;
}

/// Per worker, how its data channels moved their frames: "shm" (all
/// through shared memory), "tcp", "mixed", or "basp" (none reported).
std::string links_of(const std::pair<uint32_t, uint32_t>& l) {
  if (l.first > 0 && l.second == 0)
    return "shm";
  if (l.second > 0 && l.first == 0)
    return "tcp";
  if (l.first > 0)
    return "mixed";
  return "basp";
}

/// The data channels' transports, when workers ran in processes of their
/// own: "data channels: 4 through shared memory, 0 over TCP (worker 0: shm,
/// worker 1: shm)".
/// The workers' data channels through shared memory and over TCP, summed.
std::pair<uint32_t, uint32_t> link_totals(const train_report& r) {
  std::pair<uint32_t, uint32_t> sum{0, 0};
  for (auto& l : r.worker_links) {
    sum.first += l.first;
    sum.second += l.second;
  }
  return sum;
}

void print_links(std::FILE* out, const train_report& r) {
  auto [shm, tcp] = link_totals(r);
  if (shm + tcp == 0)
    return;
  std::string each;
  for (size_t w = 0; w < r.worker_links.size(); ++w)
    each += fmt::format("{}worker {}: {}", w > 0 ? ", " : "", w,
                        links_of(r.worker_links[w]));
  fmt::print(out,
             "data channels: {} through shared memory, {} over TCP ({})\n",
             shm, tcp, each);
}

nlohmann::json links_json(const train_report& r) {
  auto [shm, tcp] = link_totals(r);
  if (shm + tcp == 0)
    return nullptr; // one process, or every data channel off
  std::vector<std::string> each;
  for (auto& l : r.worker_links)
    each.push_back(links_of(l));
  return {{"shm", shm}, {"tcp", tcp}, {"per_worker", each}};
}

/// The final object's "tables": {"NAME": {"rows": ..., ...}}, the job-wide
/// counts' fields of the same names for each table.
nlohmann::json tables_json(const std::vector<table_stats>& tables) {
  auto out = nlohmann::json::object();
  for (auto& t : tables)
    out[t.variable] = {{"table_rows", t.rows},
                       {"table_bytes", t.bytes},
                       {"rows_admitted", t.admitted},
                       {"keys_rejected", t.rejected},
                       {"gradients_dropped", t.gradients_dropped},
                       {"evicted_ttl", t.evicted_ttl},
                       {"evicted_l2", t.evicted_l2},
                       {"evicted_budget", t.evicted_budget}};
  return out;
}

} // namespace

metrics_file::metrics_file(std::string path) : path_(std::move(path)) {
  if (path_.empty())
    return;
  tmp_ = path_ + ".tmp";
  out_.open(tmp_, std::ios::trunc);
  if (!out_)
    throw input_error(fmt::format("--metrics-out: cannot write {}", tmp_));
}

metrics_file::~metrics_file() {
  if (!tmp_.empty() && !committed_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

void metrics_file::write_line(const std::string& line) {
  if (tmp_.empty())
    return;
  out_ << line << '\n';
  out_.flush();
}

void metrics_file::write_epoch(const epoch_metrics& m) {
  nlohmann::json obj{{"type", "epoch"},
                     {"epoch", m.epoch},
                     {"steps", m.steps},
                     {"train_loss", m.train_loss}};
  for (auto& [name, value] : m.test)
    obj[name] = value;
  obj["samples_per_sec"] = m.samples_per_sec;
  obj["elapsed_s"] = m.elapsed_s;
  write_line(obj.dump());
}

void metrics_file::write_window(const window_metrics& w) {
  nlohmann::json obj{{"type", "window"},
                     {"window", w.window},
                     {"first_example", w.first_example},
                     {"examples", w.examples},
                     {"progressive_loss", w.loss},
                     {"progressive_auc", w.auc}};
  write_line(obj.dump());
}

void metrics_file::write_final(const train_report& r, const job_config& cfg,
                               double elapsed_s) {
  nlohmann::json obj{{"type", "final"}};
  if (!r.epochs.empty())
    for (auto& [name, value] : r.epochs.back().test)
      obj[name] = value;
  auto steps = std::max<uint64_t>(r.closures, 1);
  auto histogram = staleness_since(r.staleness_histogram, {});
  obj.update({{"samples_per_sec", r.samples_per_sec},
              {"epochs", r.epochs.size()},
              {"workers", r.workers},
              {"ps", r.ps},
              {"groups", r.groups},
              {"moves",
               {{"count", r.moves},
                {"floats", r.moved_floats},
                {"rows", r.moved_table_rows},
                {"longest_stall_ms", r.longest_move_stall_ms}}},
              {"parameters", r.parameters},
              {"mean_staleness", r.mean_staleness},
              {"max_staleness", r.max_staleness},
              {"staleness_buckets", staleness_labels()},
              {"staleness_histogram", histogram},
              {"pushes", r.pushes},
              {"closures", r.closures},
              {"closures_scheduled", r.scheduled},
              {"closures_reexecuted", r.reexecuted},
              {"sharding", r.sharding.empty() ? "static" : r.sharding},
              {"examples_planned", r.examples_planned},
              {"examples_trained", r.examples_trained},
              {"duplicate_pushes", r.duplicates},
              {"updates_lost", r.updates_lost},
              {"start_step", r.start_step},
              {"job_closures", r.job_closures},
              {"job_pushes", r.job_pushes},
              {"job_updates_lost", r.job_updates_lost},
              {"optimizer", cfg.optimizer.type},
              {"table_optimizer", cfg.table_optimizer.type},
              {"mode", cfg.mode},
              {"time_share",
               {{"compute", share(r, r.compute_s)},
                {"pull", share(r, r.pull_s)},
                {"push", share(r, r.push_s)},
                {"wait", share(r, wait_s(r))}}},
              {"keys_per_step", double(r.keys) / double(steps)},
              {"keys_per_sec", r.train_s > 0 ? double(r.keys) / r.train_s : 0},
              {"bytes_pulled_per_step", double(r.bytes_pulled) / double(steps)},
              {"bytes_pushed_per_step", double(r.bytes_pushed) / double(steps)},
              {"pulls_ahead", r.pulls_ahead},
              {"data_channels", links_json(r)},
              {"early_pieces", r.early_pieces},
              {"early_stages", r.early_stages},
              {"dense_equivalent_bytes_per_step", r.dense_equivalent_bytes},
              {"table_rows", r.table_rows},
              {"table_bytes", r.table_bytes},
              {"rows_admitted", r.rows_admitted},
              {"keys_rejected", r.keys_rejected},
              {"gradients_dropped", r.gradients_dropped},
              {"evicted_ttl", r.evicted_ttl},
              {"evicted_l2", r.evicted_l2},
              {"evicted_budget", r.evicted_budget},
              {"tables", tables_json(r.tables)},
              {"peak_rss_bytes",
               {{"coordinator", r.peak_rss_bytes},
                {"ps", r.ps_peak_rss_bytes},
                {"worker", r.worker_peak_rss_bytes}}},
              {"elapsed_s", elapsed_s}});
  write_line(obj.dump());
}

void metrics_file::commit() {
  if (tmp_.empty())
    return;
  out_.close();
  if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw runtime_failure(fmt::format("cannot write metrics to {}", path_));
  committed_ = true;
}

void draw_progress(std::FILE* out, uint32_t epoch, uint32_t epochs,
                   uint64_t done, uint64_t total, double elapsed) {
  constexpr int width = 30;
  auto filled = total == 0 ? 0 : static_cast<int>(width * done / total);
  double eta = done == 0 ? 0.0 : elapsed * double(total - done) / double(done);
  fmt::print(out, "\repoch {}/{} [{}{}] {}/{} steps, ETA {:.1f}s   ", epoch,
             epochs, std::string(filled, '#'), std::string(width - filled, '.'),
             done, total, eta);
  std::fflush(out);
}

void print_epoch(std::FILE* out, const epoch_metrics& m, uint32_t epochs) {
  if (out == nullptr)
    return;
  std::string test;
  for (auto& [name, value] : m.test)
    test += fmt::format("  {} {:.4f}", name, value);
  // A stream (fit's epochs: until it ends) counts parts.
  auto what = epochs == std::numeric_limits<uint32_t>::max()
                ? fmt::format("part {:>4}", m.epoch)
                : fmt::format("epoch {:>3}/{}", m.epoch, epochs);
  fmt::print(out,
             "{}  train_loss {:.4f}{}  samples/s {:.0f}  elapsed {:.1f}s\n",
             what, m.train_loss, test, m.samples_per_sec, m.elapsed_s);
  std::fflush(out);
}

void print_summary(std::FILE* out, const train_report& r) {
  if (out == nullptr || r.epochs.empty())
    return;
  std::string test;
  for (auto& [name, value] : r.epochs.back().test)
    test += fmt::format("{} {:.4f}  ", name, value);
  fmt::print(out,
             "done: {}samples/s {:.0f}  epochs {}  workers {}  ps {}\n"
             "staleness: mean {:.2f}, max {} over {} pushes; worker time: "
             "compute {:.0f}%, pull {:.0f}%, push {:.0f}%, waiting {:.0f}%\n"
             "staleness histogram (pushes by staleness): {}\n"
             "closures: {} scheduled, {} finished, {} re-executed; pushes: "
             "{} applied, {} discarded as duplicates{}{}\n",
             test, r.samples_per_sec, r.epochs.size(), r.workers, r.ps,
             r.mean_staleness, r.max_staleness, r.staleness_pushes,
             100 * share(r, r.compute_s), 100 * share(r, r.pull_s),
             100 * share(r, r.push_s), 100 * share(r, wait_s(r)),
             describe_staleness(r.staleness_histogram), r.scheduled,
             r.closures, r.reexecuted, r.pushes, r.duplicates,
             r.updates_lost == 0
               ? std::string{}
               : fmt::format(", {} lost to parameter-server recovery",
                             r.updates_lost),
             job_counts(r));
  if (r.moves > 0)
    fmt::print(out,
               "moves: {} replica(s) of {} groups moved between servers, {} "
               "floats and {} table rows; pushes to a moving group waited at "
               "most {:.1f} ms\n",
               r.moves, r.groups, r.moved_floats, r.moved_table_rows,
               r.longest_move_stall_ms);
  if (!r.sharding.empty())
    fmt::print(out,
               "data: {} shards; {} examples trained of {} planned in {} "
               "epochs{}\n",
               r.sharding, r.examples_trained, r.examples_planned,
               r.epochs.size(),
               r.examples_trained == r.examples_planned
                 ? " (each example once per epoch)"
                 : " (NOT each example once: see the log)");
  if (r.keys > 0) {
    auto steps = double(std::max<uint64_t>(r.closures, 1));
    auto moved = double(r.bytes_pulled + r.bytes_pushed) / steps;
    fmt::print(out,
               "tables: {:.0f} keys per step ({:.0f} keys/s pulled and as "
               "many pushed); {} moved per step{}; {} rows held ({})\n",
               double(r.keys) / steps,
               r.train_s > 0 ? double(r.keys) / r.train_s : 0.0,
               human_bytes(moved),
               dense_comparison(2.0 * r.dense_equivalent_bytes, moved),
               r.table_rows, human_bytes(double(r.table_bytes)));
  }
  if (r.keys_rejected + r.evicted_ttl + r.evicted_l2 + r.evicted_budget > 0)
    fmt::print(out,
               "table rows: {} admitted, {} live; keys pulled before their "
               "admission {} ({} gradient rows dropped); evicted {} by time "
               "to live, {} by L2 norm, {} for the budget\n",
               r.rows_admitted, r.table_rows, r.keys_rejected,
               r.gradients_dropped, r.evicted_ttl, r.evicted_l2,
               r.evicted_budget);
  // A stream: progressive metrics over all its parts, each part weighted by
  // its steps (about its examples / batch size).
  double weight = 0, auc = 0, loss = 0;
  for (auto& m : r.epochs) {
    double a = 0, l = 0;
    if (epoch_metric(m, "progressive_auc", a)
        && epoch_metric(m, "progressive_loss", l)) {
      weight += double(m.steps);
      auc += a * double(m.steps);
      loss += l * double(m.steps);
    }
  }
  if (weight > 0)
    fmt::print(out,
               "stream: {} parts; progressive (test, then train) over all: "
               "auc {:.4f}, log loss {:.4f}\n",
               r.epochs.size(), auc / weight, loss / weight);
  print_links(out, r);
  if (r.pulls_ahead > 0 && r.prefetch)
    fmt::print(out,
               "prefetch: {} of {} dense pulls were sent right behind the "
               "worker's previous push\n",
               r.pulls_ahead, r.closures * r.dense_groups);
  else if (r.pulls_ahead > 0)
    fmt::print(out,
               "overlap: {} of {} dense pulls were sent with the worker's "
               "previous push\n",
               r.pulls_ahead, r.closures * r.dense_groups);
  if (r.early_pieces > 0)
    fmt::print(out,
               "layer pushes: {} pieces went out during backpropagation "
               "({:.1f} per step), the rest of each push after it\n",
               r.early_pieces,
               double(r.early_pieces) / double(std::max<uint64_t>(r.closures, 1)));
  if (r.early_stages > 0)
    fmt::print(out,
               "priority pulls: {} forward layers ran before their step's "
               "last values arrived ({:.2f} per step)\n",
               r.early_stages,
               double(r.early_stages)
                 / double(std::max<uint64_t>(r.closures, 1)));
  fmt::print(out, "memory: {}\n", memory_line(r));
  std::fflush(out);
}

} // namespace actorps
