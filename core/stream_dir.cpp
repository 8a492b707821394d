#include "core/stream_dir.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace fs = std::filesystem;

namespace {

/// Bad records of one part that are logged one by one; the rest are
/// counted and summed up in one line.
constexpr uint64_t logged_bad_records = 10;

bool name_ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size()
         && s.substr(s.size() - suffix.size()) == suffix;
}

} // namespace

stream_dir::stream_dir(stream_config cfg, stream_env env)
  : cfg_(std::move(cfg)), env_(std::move(env)) {
  validate(cfg_);
  format_ = find_part_format(cfg_.format);
  schema_ = format_.schema(cfg_);
  std::error_code ec;
  if (!fs::is_directory(cfg_.dir, ec))
    throw input_error(fmt::format("data.stream_dir: {} is not a folder (it must "
                                  "exist when the stream opens)",
                                  cfg_.dir));
  last_new_ = clock::now();
}

std::string stream_dir::describe() const {
  return fmt::format("parts of {} in {}", cfg_.format, cfg_.dir);
}

void stream_dir::log(const std::string& line, bool warning) const {
  if (env_.log)
    env_.log(line);
  else if (warning)
    log::warn("stream", -1, "{}", line);
  else
    log::info("stream", -1, "{}", line);
}

void stream_dir::end(stream_end why) {
  ended_ = why;
  log(fmt::format("{}: the stream ended ({}) after {} parts, {} rows; next "
                  "part index {}",
                  cfg_.dir, to_string(why), stats_.parts, stats_.rows,
                  next_index_),
      false);
}

bool stream_dir::ahead(const std::string& name) const {
  return cursor_inclusive_ ? name >= cursor_ : name > cursor_;
}

std::optional<std::string> stream_dir::scan(std::set<std::string>* all) {
  std::set<std::string> parts;
  std::set<std::string> markers;
  std::error_code ec;
  fs::directory_iterator it{cfg_.dir, ec};
  for (; !ec && it != fs::directory_iterator{}; it.increment(ec)) {
    auto name = it->path().filename().string();
    if (name.empty() || name.front() == '.' || name.front() == '_')
      continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec))
      continue;
    if (name_ends_with(name, done_suffix))
      markers.insert(name.substr(0, name.size() - done_suffix.size()));
    else
      parts.insert(std::move(name));
  }
  if (ec) {
    // The folder went away or cannot be read: wait, as for an empty one
    // (the idle timeout, if any, ends the stream), and say so once.
    if (!listing_failed_)
      log(fmt::format("{}: cannot list the folder ({}); waiting for it",
                      cfg_.dir, ec.message()));
    listing_failed_ = true;
    return std::nullopt;
  }
  listing_failed_ = false;
  std::optional<std::string> next;
  for (auto& base : markers) {
    if (parts.count(base) == 0) {
      if (lone_markers_.insert(base).second) {
        ++stats_.markers_without_part;
        log(fmt::format("{}/{}{}: a completion marker without its part: "
                        "ignored until the part is there",
                        cfg_.dir, base, done_suffix));
      }
      continue;
    }
    if (all != nullptr)
      all->insert(base);
    if (ahead(base)) {
      if (!next)
        next = base; // markers is sorted: the first is the smallest
    } else if (passed_.insert(base).second) {
      ++stats_.late_parts;
      log(fmt::format("{}/{}: late part: it completed after {} was read, "
                      "which sorts after it; skipped (parts are read in "
                      "name order, never reordered)",
                      cfg_.dir, base, cursor_));
    }
  }
  // Forget what is gone: passed parts that were deleted, markers that were
  // removed or found their part.
  for (auto i = passed_.begin(); i != passed_.end();)
    i = markers.count(*i) == 0 || parts.count(*i) == 0 ? passed_.erase(i)
                                                        : std::next(i);
  for (auto i = lone_markers_.begin(); i != lone_markers_.end();)
    i = markers.count(*i) == 0 || parts.count(*i) != 0
          ? lone_markers_.erase(i)
          : std::next(i);
  return next;
}

void stream_dir::do_seek(uint64_t next_index, const std::string& next_name) {
  // List with every name ahead (so that none is reported late), then place
  // the cursor.
  passed_.clear();
  cursor_.clear();
  cursor_inclusive_ = true;
  std::set<std::string> all;
  scan(&all);
  if (!next_name.empty()) {
    cursor_ = next_name;
    for (auto& name : all)
      if (name < next_name)
        passed_.insert(name);
  } else {
    if (all.size() < next_index)
      throw input_error(fmt::format("data.stream_dir: cannot resume at part {}: "
                                    "{} holds only {} complete parts (were "
                                    "parts deleted? resume with the part's "
                                    "name)",
                                    next_index, cfg_.dir, all.size()));
    auto it = all.begin();
    for (uint64_t i = 0; i < next_index; ++i, ++it) {
      passed_.insert(*it);
      cursor_ = *it;
      cursor_inclusive_ = false;
    }
  }
  next_index_ = next_index;
  last_new_ = clock::now();
}

std::optional<stream_part> stream_dir::read(const std::string& name,
                                            uint64_t index) {
  auto path = cfg_.dir + "/" + name;
  bad_record_sink bad{cfg_.bad_records,
                      [this](const std::string& line) { log(line); },
                      logged_bad_records};
  dataset ds;
  try {
    ds = format_.read(path, cfg_, schema_, bad);
  } catch (const input_error& e) {
    stats_.bad_records += bad.count();
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      ++stats_.vanished_parts;
      log(fmt::format("{}: the part vanished before it was read; part {} "
                      "skipped",
                      path, index));
      return std::nullopt;
    }
    if (cfg_.bad_records == on_bad_record::fail)
      throw;
    ++stats_.bad_parts;
    log(fmt::format("{} (part {} skipped)", e.what(), index));
    return std::nullopt;
  }
  stats_.bad_records += bad.count();
  if (bad.unlogged() > 0)
    log(fmt::format("{}: {} more bad records not shown ({} in this part)",
                    path, bad.unlogged(), bad.count()));
  if (ds.rows() == 0) {
    ++stats_.empty_parts;
    log(bad.count() > 0
          ? fmt::format("{}: no usable record ({} bad); part {} skipped",
                        path, bad.count(), index)
          : fmt::format("{}: empty part (no record); part {} skipped", path,
                        index));
    return std::nullopt;
  }
  ++stats_.parts;
  stats_.rows += ds.rows();
  return stream_part{index, name,
                     std::make_shared<const dataset>(std::move(ds))};
}

std::optional<stream_part>
stream_dir::next_part(std::chrono::milliseconds wait) {
  const auto deadline = clock::now() + wait;
  for (;;) {
    if (ended_ != stream_end::none)
      return std::nullopt;
    if (env_.stop_requested && env_.stop_requested()) {
      end(stream_end::stopped);
      return std::nullopt;
    }
    if (cfg_.end_after != 0 && next_index_ >= cfg_.end_after) {
      end(stream_end::end_after);
      return std::nullopt;
    }
    if (auto name = scan()) {
      last_new_ = clock::now();
      cursor_ = *name;
      cursor_inclusive_ = false;
      passed_.insert(*name);
      if (auto part = read(*name, next_index_++))
        return part;
      continue; // skipped: the next one, if there is one
    }
    auto now = clock::now();
    auto idle = cfg_.idle_timeout;
    if (idle.count() > 0 && now - last_new_ >= idle) {
      end(stream_end::idle);
      return std::nullopt;
    }
    if (now >= deadline)
      return std::nullopt;
    auto nap = std::min<clock::duration>(cfg_.poll_interval, deadline - now);
    if (idle.count() > 0)
      nap = std::min<clock::duration>(nap, last_new_ + idle - now);
    std::this_thread::sleep_for(nap);
  }
}

std::unique_ptr<stream_source> open_stream_dir(const stream_config& cfg,
                                               stream_env env) {
  return std::make_unique<stream_dir>(cfg, std::move(env));
}

} // namespace actorps
