#include "cluster/services/checkpoint_fit.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cluster/net/handshake.hpp"
#include "core/checkpoint_reshard.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/log.hpp"
#include "core/placement.hpp"

namespace actorps {

namespace {

/// The fields of a job fingerprint in the order their differences are named:
/// the ones a variables-only restore needs equal first.
constexpr const char* field_order[] = {
  "model", "variables", "partitioning", "cluster", "optimizer", "consistency",
  "data"};

/// How a sentence names a field: "the checkpoint was written with other
/// data".
std::string field_phrase(const std::string& field) {
  if (field == "data" || field == "variables")
    return "other " + field;
  if (field == "consistency")
    return "another consistency mode";
  return "another " + field;
}

/// The ", "-separated parts of fingerprint field `field` ("fashion_mnist,
/// train limit 0, batch size 64, shuffle seed 1"), each readable on its own.
std::vector<std::string> parts_of(const std::string& field,
                                  const std::string& text) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    auto at = text.find(", ", begin);
    out.push_back(text.substr(begin, at == std::string::npos
                                       ? std::string::npos
                                       : at - begin));
    if (at == std::string::npos)
      break;
    begin = at + 2;
  }
  if (field == "data")
    out.front() = "dataset " + out.front();
  return out;
}

/// `xs` joined with ", ", cut after about 120 characters ("none" if empty).
std::string joined_parts(const std::vector<std::string>& xs) {
  constexpr size_t width = 120;
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ", ") + x;
  if (out.empty())
    return "none";
  if (out.size() > width)
    out = out.substr(0, width) + "...";
  return out;
}

/// Only the parts of a field that differ: "train limit 6400 in the
/// checkpoint; train limit 1000 in this job". With parts added or removed,
/// everything from the first difference on.
std::string part_difference(const std::string& field, const std::string& ckpt,
                            const std::string& job) {
  auto a = parts_of(field, ckpt);
  auto b = parts_of(field, job);
  std::vector<std::string> x;
  std::vector<std::string> y;
  if (a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        x.push_back(a[i]);
        y.push_back(b[i]);
      }
  } else {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i])
      ++i;
    x.assign(a.begin() + static_cast<ptrdiff_t>(std::min(i, a.size())),
             a.end());
    y.assign(b.begin() + static_cast<ptrdiff_t>(std::min(i, b.size())),
             b.end());
  }
  return fmt::format("{} in the checkpoint; {} in this job", joined_parts(x),
                     joined_parts(y));
}

/// One difference between a checkpoint and the job: the field, and what
/// differs ("" when the checkpoint does not record the field).
struct field_difference {
  std::string field;
  std::string detail;
};

/// The fields among `fields` in which checkpoint `st` differs from the job
/// `cfg` placed as `layout`, without those that follow from another: the
/// variables from the model, the partitioning from the variables or from
/// the number of ps.
std::vector<field_difference>
differences(const checkpoint_state& st, const job_config& cfg,
            const placement& layout, const std::vector<std::string>& fields) {
  auto mine = checkpoint_job_fields(make_fingerprint(cfg, layout));
  std::vector<field_difference> out;
  auto differs = [&](const std::string& field) {
    return std::any_of(out.begin(), out.end(),
                       [&](const field_difference& d) {
                         return d.field == field;
                       });
  };
  for (auto* field : field_order) {
    if (std::find(fields.begin(), fields.end(), field) == fields.end())
      continue;
    auto i = st.job.find(field);
    auto& text = mine.at(field);
    if (i != st.job.end() && i->second == text)
      continue;
    std::string name = field;
    if (name == "variables" && differs("model"))
      continue;
    if (name == "partitioning"
        && (differs("model") || differs("variables")
            || st.ps_clocks.size() != groups_of(cfg)))
      continue;
    out.push_back({name, i == st.job.end()
                           ? std::string{}
                           : part_difference(name, i->second, text)});
  }
  return out;
}

/// "the checkpoint was written with other data: X in the checkpoint; Y in
/// this job", or with several: "... with another optimizer (...) and other
/// data (...)".
std::string written_with(const std::vector<field_difference>& diffs) {
  auto one = [](const field_difference& d, bool alone) {
    if (d.detail.empty())
      return fmt::format("no record of its {} (an older checkpoint)",
                         d.field);
    return alone ? fmt::format("{}: {}", field_phrase(d.field), d.detail)
                 : fmt::format("{} ({})", field_phrase(d.field), d.detail);
  };
  std::string out = "the checkpoint was written with ";
  for (size_t i = 0; i < diffs.size(); ++i) {
    if (i > 0)
      out += i + 1 == diffs.size() ? " and " : ", ";
    out += one(diffs[i], diffs.size() == 1);
  }
  return out;
}

/// Every shard of `layout` appears in `st` once, with its shape.
void check_shards(const checkpoint_state& st, const placement& layout,
                  const std::string& where) {
  if (st.shards.size() != layout.shards.size())
    throw input_error(fmt::format("{}: {} shards, the job has {}", where,
                                  st.shards.size(), layout.shards.size()));
  for (auto& s : layout.shards) {
    auto& var = layout.variables[s.variable];
    bool table = s.kind == variable_kind::table;
    auto n = std::count_if(st.shards.begin(), st.shards.end(),
                           [&](const checkpoint_shard& c) {
                             if (c.variable != var.name || c.index != s.index
                                 || c.table != table || c.cols != var.cols
                                 || c.ps != s.ps)
                               return false;
                             return table || (c.row_begin == s.row_begin
                                              && c.row_end == s.row_end
                                              && c.values.size() == s.size);
                           });
    if (n != 1)
      throw input_error(fmt::format(
        "{}: shard {} of {} ({} on ps {}) is missing or appears twice", where,
        s.index, var.name,
        table ? std::string{"table shard"}
              : fmt::format("rows {}-{}", s.row_begin, s.row_end),
        s.ps));
  }
}

} // namespace

namespace {

/// A checkpoint's "cluster": the workers and the groups its shards are
/// placed over, whatever servers held them ("2 workers, 3 ps, 6 groups" ->
/// "2 workers, 6 ps", as a job of 6 ps and one group each writes it), so
/// that it restores onto the same groups on any number of servers.
std::string checkpoint_cluster(const std::string& cluster) {
  auto last = cluster.rfind(", ");
  auto first = cluster.find(", ");
  const std::string suffix = " groups";
  if (last == std::string::npos || first == last
      || cluster.size() < suffix.size()
      || cluster.compare(cluster.size() - suffix.size(), suffix.size(),
                         suffix) != 0)
    return cluster;
  auto groups = cluster.substr(last + 2, cluster.size() - suffix.size()
                                           - (last + 2));
  return cluster.substr(0, first) + ", " + groups + " ps";
}

} // namespace

std::map<std::string, std::string>
checkpoint_job_fields(const job_fingerprint& fp) {
  return {{"model", fp.model},
          {"variables", fp.variables},
          {"partitioning", fp.partitioning},
          {"optimizer", fp.optimizer},
          {"consistency", fp.consistency},
          {"cluster", checkpoint_cluster(fp.cluster)},
          {"data", fp.data}};
}

void check_checkpoint(const checkpoint_state& st, const job_config& cfg,
                      const placement& layout, const std::string& dir) {
  auto where = dir + "/manifest.json";
  auto diffs = differences(st, cfg, layout,
                           {std::begin(field_order), std::end(field_order)});
  if (!diffs.empty()) {
    // Without the fields a variables-only restore needs, it can start a new
    // run from this checkpoint.
    bool variables_fit
      = st.ps_clocks.size() == groups_of(cfg)
        && std::none_of(diffs.begin(), diffs.end(),
                        [](const field_difference& d) {
                          return d.field == "model" || d.field == "variables"
                                 || d.field == "partitioning";
                        });
    std::string hint;
    // (With other differences, the number of ps is not the way out:
    // reshard_to_fit re-cuts a checkpoint that differs only in it.)
    if (st.ps_clocks.size() != groups_of(cfg) && !st.ps_clocks.empty()
        && diffs.size() == 1)
      hint = fmt::format("; its variables are placed on {} ps: restore it "
                         "with --ps {}",
                         st.ps_clocks.size(), st.ps_clocks.size());
    else if (variables_fit)
      hint = "; use --restore-variables-only to start a new run from its "
             "variables";
    throw input_error(
      fmt::format("{}: {}{}", where, written_with(diffs), hint));
  }
  if (st.workers.size() != cfg.workers)
    throw input_error(fmt::format("{}: {} worker positions for {} workers",
                                  where, st.workers.size(), cfg.workers));
  auto groups = groups_of(cfg);
  if (st.ps_clocks.size() != groups || st.optimizer_steps.size() != groups)
    throw input_error(fmt::format("{}: ps clocks or optimizer steps for {} ps "
                                  "(expected {})",
                                  where, st.ps_clocks.size(), groups_of(cfg)));
  check_shards(st, layout, where);
}

void check_checkpoint_variables(const checkpoint_state& st,
                                const job_config& cfg, const placement& layout,
                                const std::string& dir) {
  auto where = dir + "/manifest.json";
  auto diffs = differences(st, cfg, layout,
                           {"model", "variables", "partitioning"});
  if (!diffs.empty())
    throw input_error(fmt::format("{}: {}; --restore-variables-only needs the "
                                  "same model, variables and partitioning",
                                  where, written_with(diffs)));
  // Every shard names the ps that holds it: another number of ps is another
  // placement, even where the shards' rows are the same (reshard_to_fit
  // re-cuts a checkpoint of the same model and variables first).
  if (st.ps_clocks.size() != groups_of(cfg))
    throw input_error(fmt::format(
      "{}: the checkpoint's variables are placed on {} ps and this job has {}; "
      "--restore-variables-only restores each shard on its own ps: use --ps "
      "{}",
      where, st.ps_clocks.size(), groups_of(cfg), st.ps_clocks.size()));
  check_shards(st, layout, where);
}

bool reshard_to_fit(checkpoint_state& st, const job_config& cfg,
                    const placement& layout, const std::string& dir,
                    bool variables_only) {
  if (st.ps_clocks.empty() || checkpoint_fits_placement(st, layout))
    return false;
  std::vector<std::string> same{"model", "variables"};
  if (!variables_only)
    same.insert(same.end(), {"optimizer", "consistency", "data"});
  if (!differences(st, cfg, layout, same).empty())
    return false;
  auto mine = checkpoint_job_fields(make_fingerprint(cfg, layout));
  if (!variables_only) {
    // The same workers, on the checkpoint's number of ps.
    auto i = st.job.find("cluster");
    auto cluster = fmt::format("{} workers, {} ps", cfg.workers,
                               st.ps_clocks.size());
    if (i == st.job.end() || i->second != cluster)
      return false;
  }
  resharded_checkpoint out;
  try {
    out = reshard_checkpoint(st, layout);
  } catch (const input_error& e) {
    throw input_error(fmt::format("{}/manifest.json: {}", dir, e.what()));
  }
  log::info("coordinator", -1,
            "restoring a checkpoint of {} ps onto {}: re-sharded {} dense and "
            "{} table shards",
            st.ps_clocks.size(), groups_of(cfg), out.dense_shards,
            out.table_shards);
  st = std::move(out.state);
  st.job["partitioning"] = mine.at("partitioning");
  st.job["cluster"] = mine.at("cluster");
  return true;
}

} // namespace actorps
