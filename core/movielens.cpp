#include "core/movielens.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/csv_reader.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/memory_provider.hpp"
#include "core/options.hpp"

namespace actorps {

namespace {

/// The columns the reader uses, in this order.
constexpr std::array<const char*, 6> needed
  = {"movieId", "year", "genres", "userId", "rating", "timestamp"};
enum column : int { c_movie, c_year, c_genres, c_user, c_rating, c_time };
constexpr int unused = -1;

/// One rating as read.
struct rating_row {
  uint64_t user = 0;
  uint64_t movie = 0;
  int64_t timestamp = 0;
  float rating = 0;
  uint32_t year = 0;   // 0: NA
  uint32_t genres = 0; // index into ratings_state::combos
};

/// What the reader collects from the records.
struct ratings_state {
  bool header_done = false;
  size_t columns = 0;        // columns of the header
  std::vector<int> role;     // header column -> column, or unused
  std::vector<rating_row> rows;
  // Distinct genre lists ("Action|Comedy"), numbered in order of appearance.
  std::unordered_map<std::string, uint32_t> combo_ids;
  std::vector<std::string> combos;
};

template <class T>
bool parse_all(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

/// Reads the header: which column is which. Returns "" or what is wrong.
std::string read_ratings_header(ratings_state& st, const std::vector<std::string>& header) {
  st.header_done = true;
  st.columns = header.size();
  st.role.assign(header.size(), unused);
  for (size_t c = 0; c < needed.size(); ++c) {
    auto it = std::find(header.begin(), header.end(), needed[c]);
    if (it == header.end())
      return fmt::format("the header has no column {} (it needs movieId, "
                         "year, genres, userId, rating, timestamp; got: {})",
                         needed[c], fmt::join(header, ","));
    st.role[static_cast<size_t>(it - header.begin())] = static_cast<int>(c);
  }
  return {};
}

/// Reads one rating into st.rows. Returns "" or what is wrong: the first
/// field that is not what its column needs, else a column count other than
/// the header's.
std::string read_rating(ratings_state& st, const std::vector<std::string>& fields) {
  rating_row row;
  for (size_t index = 0; index < fields.size() && index < st.columns;
       ++index) {
    std::string_view s = fields[index];
    switch (st.role[index]) {
      case c_movie:
        if (!parse_all(s, row.movie))
          return fmt::format("movieId {} is not a whole number", quoted(s));
        break;
      case c_user:
        if (!parse_all(s, row.user))
          return fmt::format("userId {} is not a whole number", quoted(s));
        break;
      case c_year:
        if (s == "NA")
          row.year = 0;
        else if (!parse_all(s, row.year))
          return fmt::format("year {} is neither a whole number nor NA",
                             quoted(s));
        break;
      case c_rating: {
        double r = 0;
        if (!parse_all(s, r) || !std::isfinite(r))
          return fmt::format("rating {} is not a number", quoted(s));
        row.rating = static_cast<float>(r);
        break;
      }
      case c_time:
        if (!parse_all(s, row.timestamp))
          return fmt::format("timestamp {} is not an integer", quoted(s));
        break;
      case c_genres: {
        auto [it, fresh] = st.combo_ids.try_emplace(
          fields[index], static_cast<uint32_t>(st.combos.size()));
        if (fresh)
          st.combos.push_back(fields[index]);
        row.genres = it->second;
        break;
      }
      default:
        break;
    }
  }
  if (fields.size() != st.columns)
    return fmt::format("expected {} columns as in the header, got {}",
                       st.columns, fields.size());
  st.rows.push_back(row);
  return {};
}

/// The whole file, or input_error.
std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    throw input_error(fmt::format("{}: cannot open file (missing or not "
                                  "readable)",
                                  path));
  std::string text;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, got);
  bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad)
    throw input_error(fmt::format("{}: cannot read file", path));
  return text;
}

/// Parses `text` (core/csv_reader.hpp); the first problem is an input_error
/// "PATH:LINE: ...".
void parse_csv(const std::string& path, const std::string& text,
               ratings_state& st) {
  read_csv(
    text,
    [&](uint64_t, const std::vector<std::string>& fields) {
      return st.header_done ? read_rating(st, fields) : read_ratings_header(st, fields);
    },
    [&](uint64_t line, const std::string& what) -> bool {
      throw input_error(fmt::format("{}:{}: {}", path, line, what));
    });
}

/// An empty dataset with the schema of `schema`.
dataset empty_like(const data_schema& schema) {
  dataset ds;
  ds.schema = schema;
  ds.examples.reset(0, schema.fields.size());
  return ds;
}

} // namespace

movielens_data read_movielens_csv(const std::string& path) {
  ratings_state st;
  auto text = read_file(path);
  st.rows.reserve(text.size() / 64);
  parse_csv(path, text, st);
  if (!st.header_done)
    throw input_error(fmt::format("{}: empty file (no header)", path));
  if (st.rows.empty())
    throw input_error(fmt::format("{}: no ratings", path));
  const auto& rows = st.rows;
  const auto n = rows.size();

  // Genre names in sorted order; each distinct list -> its sorted key set.
  std::map<std::string, uint64_t> names;
  std::vector<std::vector<std::string_view>> split(st.combos.size());
  for (size_t c = 0; c < st.combos.size(); ++c) {
    std::string_view s = st.combos[c];
    while (!s.empty()) {
      auto bar = s.find('|');
      auto name = s.substr(0, bar);
      if (!name.empty()) {
        split[c].push_back(name);
        names.emplace(std::string{name}, 0);
      }
      s = bar == std::string_view::npos ? std::string_view{}
                                        : s.substr(bar + 1);
    }
  }
  uint64_t next_id = 0;
  for (auto& kv : names)
    kv.second = next_id++;
  std::vector<std::vector<uint64_t>> combo_keys(st.combos.size());
  for (size_t c = 0; c < split.size(); ++c) {
    for (auto name : split[c])
      combo_keys[c].push_back(names.find(std::string{name})->second);
    std::sort(combo_keys[c].begin(), combo_keys[c].end());
    combo_keys[c].erase(std::unique(combo_keys[c].begin(),
                                    combo_keys[c].end()),
                        combo_keys[c].end());
  }

  // The schema, over the whole file.
  uint64_t max_user = 0, max_movie = 0;
  uint32_t max_year = 0;
  for (auto& r : rows) {
    max_user = std::max(max_user, r.user);
    max_movie = std::max(max_movie, r.movie);
    max_year = std::max(max_year, r.year);
  }
  data_schema schema;
  schema.dense_dim = 0;
  schema.fields = {field_schema{"user", max_user + 1, false},
                   field_schema{"movie", max_movie + 1, false},
                   field_schema{"genres", names.size(), false},
                   field_schema{"year", uint64_t{max_year} + 1, false}};
  schema.labels = label_kind::binary;
  schema.classes = 2;

  // The split: per user by (timestamp, movieId, file order); the last
  // max(1, round(0.2 n)) are test rows.
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const auto& x = rows[a];
    const auto& y = rows[b];
    if (x.user != y.user)
      return x.user < y.user;
    if (x.timestamp != y.timestamp)
      return x.timestamp < y.timestamp;
    if (x.movie != y.movie)
      return x.movie < y.movie;
    return a < b;
  });
  std::vector<uint8_t> is_test(n, 0);
  for (size_t first = 0; first < n;) {
    size_t last = first;
    while (last < n && rows[order[last]].user == rows[order[first]].user)
      ++last;
    auto count = last - first;
    auto n_test = std::max<size_t>(1, (count + 2) / 5);
    for (size_t k = last - n_test; k < last; ++k)
      is_test[order[k]] = 1;
    first = last;
  }

  movielens_data result{empty_like(schema), empty_like(schema)};
  for (size_t i = 0; i < n; ++i) {
    const auto& r = rows[i];
    auto& ex = is_test[i] ? result.test.examples : result.train.examples;
    auto put = [&](size_t f, uint64_t key) {
      ex.fields[f].keys.push_back(key);
    };
    put(0, r.user);
    put(1, r.movie);
    for (auto k : combo_keys[r.genres])
      put(2, k);
    put(3, r.year);
    for (auto& f : ex.fields)
      f.offsets.push_back(f.keys.size());
    ex.labels.push_back(r.rating >= 4.0f ? 1 : 0);
    ++ex.rows;
  }
  return result;
}

movielens_data load_movielens(const std::string& dir) {
  auto path = dir + "/movielens.csv";
  if (std::FILE* f = std::fopen(path.c_str(), "rb"); f != nullptr)
    std::fclose(f);
  else
    throw input_error(fmt::format(
      "{} not found: export it once with scripts/export_movielens.sh (needs "
      "Debian's r-cran-dslabs: scripts/setup.sh installs it)",
      path));
  return read_movielens_csv(path);
}

// -- the dataset movielens ------------------------------------------------------

namespace {

/// Keeps the first `limit` rows of `ds` (0 = all).
void truncate(dataset& ds, uint64_t limit) {
  auto& ex = ds.examples;
  if (limit == 0 || limit >= ex.rows)
    return;
  ex.rows = limit;
  if (ex.dense_bytes.empty())
    ex.dense.resize(limit * ex.dense_dim);
  else
    ex.dense_bytes.resize(limit * ex.dense_dim);
  for (auto& f : ex.fields) {
    f.offsets.resize(limit + 1);
    f.keys.resize(f.offsets.back());
    if (!f.values.empty())
      f.values.resize(f.offsets.back());
  }
  ex.labels.resize(limit);
}

} // namespace

std::unique_ptr<data_provider> open_movielens(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "movielens"};
  opts.finish();
  auto dir = dataset_dir(cfg, "data/movielens");
  // One read of the CSV gives both splits; each loader takes its own.
  auto both = std::make_shared<std::optional<movielens_data>>();
  auto load = [both, dir] {
    if (!*both)
      *both = load_movielens(dir);
    return both;
  };
  auto train_limit = cfg.train_limit;
  auto test_limit = cfg.test_limit;
  return std::make_unique<memory_provider>(
    "movielens from " + dir + "/movielens.csv",
    [=] {
      auto ds = std::move((*load())->train);
      truncate(ds, train_limit);
      return ds;
    },
    [=] {
      auto ds = std::move((*load())->test);
      truncate(ds, test_limit);
      return ds;
    });
}

} // namespace actorps
