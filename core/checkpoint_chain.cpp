#include "core/checkpoint_chain.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/checkpoint_files.hpp"
#include "core/error.hpp"
#include "core/table_store.hpp"
#include "core/update_rule.hpp"

namespace actorps::detail {

namespace {

/// A rule that only sizes a table_store's slots: a replay restores rows
/// (values, slots, steps as written) and never applies a gradient.
class slot_holder : public update_rule {
public:
  explicit slot_holder(size_t slots) : slots_(slots) {
    // nop
  }

  const std::string& name() const override {
    return name_;
  }

  size_t slot_count() const override {
    return slots_;
  }

  void apply(float*, float* const*, const float*, size_t,
             uint64_t) const override {
    throw std::logic_error("a checkpoint replay applies no gradient");
  }

  std::string describe() const override {
    return name_;
  }

private:
  size_t slots_;
  std::string name_ = "checkpoint-replay";
};

bool has_manifest(const std::string& dir) {
  struct stat sb;
  auto path = join_path(dir, checkpoint_manifest_name);
  return ::stat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

decoded_manifest read_manifest(const std::string& dir) {
  auto path = join_path(dir, checkpoint_manifest_name);
  return decode_manifest(path, read_text_file(path, "checkpoint manifest"));
}

table_store::contents contents_of(checkpoint_shard& s) {
  table_store::contents c;
  c.keys = std::move(s.keys);
  c.values = std::move(s.values);
  c.slots = std::move(s.slots);
  c.steps = std::move(s.steps);
  return c;
}

std::string shard_name(const checkpoint_shard& s) {
  return fmt::format("{} shard {} of \"{}\"", s.table ? "table" : "dense",
                     s.index, s.variable);
}

} // namespace

// -- chains -------------------------------------------------------------------

std::vector<chain_link> resolve_chain(const std::string& dir) {
  std::vector<chain_link> chain;
  chain.push_back({dir, read_manifest(dir)});
  std::set<std::string> seen{base_name(dir)};
  while (chain.back().manifest.state.delta) {
    auto& at = chain.back();
    auto& st = at.manifest.state;
    auto broken = [&](const std::string& what) {
      throw input_error(fmt::format("{}: a broken chain of checkpoints: {} is "
                                    "a delta of {}, {}; nothing is restored "
                                    "from it",
                                    dir, at.dir, st.base, what));
    };
    auto base_dir = join_path(parent_of(at.dir), st.base);
    if (!seen.insert(st.base).second)
      broken("which is in its own chain");
    if (!has_manifest(base_dir))
      broken("which is missing");
    auto base = read_manifest(base_dir);
    if (base.state.id != st.base_id)
      broken(fmt::format("which has id {:016x}, not {:016x} (replaced since)",
                         base.state.id, st.base_id));
    if (base.state.global_step > st.global_step)
      broken(fmt::format("which is newer (step {} > {})",
                         base.state.global_step, st.global_step));
    chain.push_back({base_dir, std::move(base)});
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// -- replay -------------------------------------------------------------------

struct checkpoint_replay::table {
  std::shared_ptr<const update_rule> rule;
  table_store store;
};

checkpoint_replay::checkpoint_replay(checkpoint_state full, std::string dir)
  : st_(std::move(full)), dir_(std::move(dir)) {
  for (auto& s : st_.shards) {
    if (!s.table) {
      tables_.emplace_back();
      continue;
    }
    table_shard_def def;
    def.variable = s.variable;
    def.dim = s.cols;
    auto rule = std::make_shared<slot_holder>(s.slots.size());
    auto t = std::make_unique<table>(table{rule, table_store{def, rule}});
    try {
      t->store.import_rows(contents_of(s));
      // The rows live in the store now; the shard keeps its slot count.
      s.slots.clear();
      s.slots.resize(rule->slot_count());
    } catch (const std::exception& e) {
      throw input_error(fmt::format("{}: {}: {}", dir_, shard_name(s),
                                    e.what()));
    }
    tables_.push_back(std::move(t));
  }
}

checkpoint_replay::~checkpoint_replay() = default;

void checkpoint_replay::apply(checkpoint_state delta, const std::string& dir) {
  auto where = join_path(dir, checkpoint_manifest_name);
  auto fail = [&](const std::string& what) {
    throw input_error(fmt::format("{}: {}", where, what));
  };
  if (delta.job != st_.job)
    fail(fmt::format("a delta of another job than its base {}", dir_));
  if (delta.shards.size() != st_.shards.size())
    fail(fmt::format("{} shards, its base {} has {}", delta.shards.size(),
                     dir_, st_.shards.size()));
  std::map<std::pair<std::string, uint32_t>, size_t> at;
  for (size_t i = 0; i < st_.shards.size(); ++i)
    at.emplace(std::make_pair(st_.shards[i].variable, st_.shards[i].index), i);
  for (auto& d : delta.shards) {
    auto found = at.find({d.variable, d.index});
    if (found == at.end())
      fail(fmt::format("{} is not in its base {}", shard_name(d), dir_));
    auto i = found->second;
    auto& s = st_.shards[i];
    if (d.table != s.table || d.cols != s.cols || d.ps != s.ps
        || d.slots.size() != s.slots.size() || d.row_begin != s.row_begin
        || d.row_end != s.row_end)
      fail(fmt::format("{} has another shape or server than in its base {}",
                       shard_name(d), dir_));
    if (!d.table) {
      s.values = std::move(d.values);
      s.slots = std::move(d.slots);
      continue;
    }
    auto& store = tables_[i]->store;
    try {
      if (d.delta)
        store.apply_delta(contents_of(d), d.removed);
      else
        store.import_rows(contents_of(d));
    } catch (const std::exception& e) {
      fail(fmt::format("{}: {}", shard_name(d), e.what()));
    }
  }
  st_.global_step = delta.global_step;
  st_.epoch = delta.epoch;
  st_.step_in_epoch = delta.step_in_epoch;
  st_.workers = std::move(delta.workers);
  st_.ps_clocks = std::move(delta.ps_clocks);
  st_.optimizer_steps = std::move(delta.optimizer_steps);
  st_.id = delta.id;
  dir_ = dir;
}

checkpoint_state checkpoint_replay::finish() && {
  for (size_t i = 0; i < st_.shards.size(); ++i) {
    if (!tables_[i])
      continue;
    auto c = tables_[i]->store.export_rows();
    auto& s = st_.shards[i];
    s.keys = std::move(c.keys);
    s.values = std::move(c.values);
    s.slots = std::move(c.slots);
    s.steps = std::move(c.steps);
    tables_[i].reset();
  }
  st_.delta = false;
  st_.base.clear();
  st_.base_id = 0;
  return std::move(st_);
}

// -- retention ----------------------------------------------------------------

void prune_chains(const std::string& root, const std::string& written,
                  uint32_t keep, uint64_t step) {
  if (!remove_tmp_dirs(root, step))
    return;
  int err = 0;
  auto listed = list_checkpoints(root, err); // newest first
  if (err != 0)
    return;
  // Each checkpoint's base ("" for a full one or an unreadable manifest),
  // checked: a base of another id counts as missing.
  std::map<std::string, std::string> base_of;
  std::map<std::string, uint64_t> id_of;
  std::map<std::string, uint64_t> base_id_of;
  for (auto& ck : listed) {
    try {
      auto m = read_manifest(join_path(root, ck.name));
      id_of[ck.name] = m.state.id;
      if (m.state.delta) {
        base_of[ck.name] = m.state.base;
        base_id_of[ck.name] = m.state.base_id;
      }
    } catch (const std::exception&) {
      id_of[ck.name] = 0; // counts as a full checkpoint
    }
  }
  // The full checkpoint that a checkpoint's chain starts at, "" if broken.
  auto root_of = [&](const std::string& name) {
    std::string at = name;
    for (size_t hops = 0; hops <= listed.size(); ++hops) {
      auto b = base_of.find(at);
      if (b == base_of.end())
        return at;
      auto id = id_of.find(b->second);
      if (id == id_of.end() || id->second != base_id_of[at])
        return std::string{};
      at = b->second;
    }
    return std::string{};
  };
  std::set<std::string> kept_fulls{root_of(written)};
  uint64_t oldest_kept = step;
  for (auto& ck : listed) {
    if (base_of.count(ck.name) > 0)
      continue;
    if (kept_fulls.count(ck.name) > 0 || kept_fulls.size() < keep) {
      kept_fulls.insert(ck.name);
      oldest_kept = std::min(oldest_kept, ck.step);
    }
  }
  kept_fulls.erase("");
  // `listed` is newest first: deltas go before their bases.
  for (auto& ck : listed) {
    if (ck.name == written)
      continue;
    auto full = root_of(ck.name);
    bool keep_it = full.empty() ? ck.step >= oldest_kept
                                : kept_fulls.count(full) > 0;
    if (!keep_it)
      remove_checkpoint(root, ck.name, step);
  }
}

uint64_t new_checkpoint_id() {
  static std::mutex mtx;
  std::lock_guard<std::mutex> guard{mtx};
  static std::mt19937_64 gen{[] {
    std::random_device rd;
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(now)
           ^ (static_cast<uint64_t>(::getpid()) << 16);
  }()};
  uint64_t id = 0;
  while (id == 0)
    id = gen();
  return id;
}

} // namespace actorps::detail
