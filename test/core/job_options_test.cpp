#include "core/job_options.hpp"

#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

using namespace actorps;
using json = nlohmann::json;

#ifndef ACTORPS_SOURCE_DIR
#  error "ACTORPS_SOURCE_DIR must name the repository root"
#endif

namespace {

/// The row's field in `cfg`, as text ("16", "true", "chain", "0.5").
std::string value_of(const job_option& row, job_config cfg) {
  return std::visit(
    [&](auto access) -> std::string {
      using access_type = decltype(access);
      if constexpr (std::is_same_v<access_type, std::monostate>) {
        return "";
      } else if constexpr (std::is_same_v<access_type, word_access>) {
        return access.get(cfg);
      } else {
        auto& value = access(cfg);
        using value_type = std::remove_reference_t<decltype(value)>;
        if constexpr (std::is_same_v<value_type, bool>)
          return value ? "true" : "false";
        else
          return fmt::format("{}", value);
      }
    },
    row.field);
}

/// A value other than the default for each row, as JSON, as a flag's value
/// and as value_of writes it; chosen so that the job stays valid.
struct sample {
  json config;
  std::string flag;
  std::string expected;
};

/// Strings that only a registry or validate() checks.
/// Whole numbers whose next value (default + 1) a job refuses: a valid one.
const std::map<std::string, uint64_t> whole_samples = {
  {"cluster.groups", 4}, // at least cluster.ps (2)
  {"cluster.max_ps", 3}, // likewise
};

const std::map<std::string, std::string> text_samples = {
  {"model.type", "embedding_mlp"},
  {"data.dataset", "a9a"},
  {"data.dir", "/data/elsewhere"},
  {"data.stream_dir", "/data/stream"},
  {"cluster.push_format", "bf16"},
  {"cluster.pull_format", "fp16"},
  {"cluster.tls.dir", "certs"},
  {"cluster.tls.ca", "ca.pem"},
  {"cluster.tls.cert", "ps0.pem"},
  {"cluster.tls.key", "ps0.key"},
  {"cluster.secret_file", "job.secret"},
  {"optimizer.type", "adam"},
  {"table_optimizer.type", "sgd"},
  {"training.checkpoint_dir", "/tmp/checkpoints"},
  {"training.export_dir", "/tmp/models"},
  {"training.early_stopping_monitor", "test_loss"},
};

sample other_value(const job_option& row) {
  auto current = value_of(row, job_config{});
  if (!row.words.empty()) {
    auto w = row.words[0] == current ? row.words[1] : row.words[0];
    return {w, w, w};
  }
  return std::visit(
    [&](auto access) -> sample {
      using access_type = decltype(access);
      if constexpr (std::is_same_v<access_type, std::monostate>
                    || std::is_same_v<access_type, word_access>) {
        FAIL(row.key << ": no sample value");
        return {};
      } else {
        job_config defaults;
        auto value = access(defaults);
        using value_type = decltype(value);
        if constexpr (std::is_same_v<value_type, bool>) {
          // A switch can only turn a field on.
          return {!value, !value ? "on" : "off", !value ? "true" : "false"};
        } else if constexpr (std::is_same_v<value_type, std::string>) {
          auto i = text_samples.find(row.key);
          if (i == text_samples.end())
            FAIL(row.key << ": add a valid sample value to text_samples");
          return {i->second, i->second, i->second};
        } else if constexpr (std::is_same_v<value_type, float>) {
          double x = (static_cast<double>(value) + row.max_real) / 2;
          return {x, fmt::format("{}", x),
                  fmt::format("{}", static_cast<float>(x))};
        } else {
          uint64_t x = value < row.max ? value + 1 : value - 1;
          if (auto i = whole_samples.find(row.key); i != whole_samples.end())
            x = i->second;
          return {x, std::to_string(x), std::to_string(x)};
        }
      }
    },
    row.field);
}

/// A config that sets `key` ("cluster.tls.ca") to `value`.
std::string config_with(const std::string& key, const json& value) {
  json doc = json::object();
  json* at = &doc;
  std::istringstream parts{key};
  std::string part;
  std::vector<std::string> path;
  while (std::getline(parts, part, '.'))
    path.push_back(part);
  for (size_t i = 0; i + 1 < path.size(); ++i)
    at = &(*at)[path[i]];
  (*at)[path.back()] = value;
  return doc.dump();
}

bool is_switch(const job_option& row) {
  return row.value_name.empty();
}

} // namespace

TEST_CASE("the option table names each key and each flag once, and a row "
          "read by hand with a flag says how the flag sets it",
          "[core][job_options]") {
  std::set<std::string> keys;
  std::set<std::string> flags;
  for (auto& row : job_options()) {
    INFO(row.key);
    CHECK(keys.insert(row.key).second);
    CHECK_FALSE(row.help.empty());
    if (!row.flag.empty()) {
      CHECK(row.flag.rfind("--", 0) == 0);
      CHECK(flags.insert(row.flag).second);
      CHECK(find_job_flag(row.flag) == &row);
    }
    CHECK(find_job_key(row.key) == &row);
    if (row.by_hand()) {
      CHECK_FALSE(row.shape.empty());
      if (!row.flag.empty())
        CHECK(row.set_flag != nullptr);
    }
  }
  CHECK(find_job_flag("--config") == nullptr);
  CHECK(find_job_key("cluster.replication_lag")->flag == "--replication-lag");
}

TEST_CASE("every row's default is job_config's, lies within its bounds, and "
          "an empty config keeps it",
          "[core][job_options]") {
  auto parsed = parse_job_config("{}");
  for (auto& row : job_options()) {
    if (row.by_hand())
      continue;
    INFO(row.key);
    auto fallback = value_of(row, job_config{});
    if (!row.default_text.empty()) // a config's default differs from code's
      CHECK(value_of(row, parsed) == row.default_text);
    else
      CHECK(value_of(row, parsed) == fallback);
    if (!row.words.empty())
      CHECK(word_problem(row, fallback).empty());
    std::visit(
      [&](auto access) {
        using access_type = decltype(access);
        if constexpr (!std::is_same_v<access_type, std::monostate>
                      && !std::is_same_v<access_type, word_access>) {
          job_config defaults;
          auto value = access(defaults);
          using value_type = decltype(value);
          if constexpr (std::is_same_v<value_type, float>) {
            CHECK(row.min_real <= value);
            CHECK(value <= row.max_real);
          } else if constexpr (std::is_integral_v<value_type>
                               && !std::is_same_v<value_type, bool>) {
            CHECK(row.min <= value);
            CHECK(value <= row.max);
            // The bounds fit the field.
            CHECK(row.max <= std::numeric_limits<value_type>::max());
          }
        }
      },
      row.field);
  }
}

TEST_CASE("a config with a key sets the row's field, and the row's flag sets "
          "it too",
          "[core][job_options]") {
  for (auto& row : job_options()) {
    if (row.by_hand())
      continue;
    INFO(row.key);
    auto s = other_value(row);
    REQUIRE(s.expected != value_of(row, job_config{}));
    auto text = config_with(row.key, s.config);
    INFO(text);
    CHECK(value_of(row, parse_job_config(text)) == s.expected);
    if (row.flag.empty())
      continue;
    job_config cfg;
    set_from_flag(cfg, row, is_switch(row) ? "" : s.flag);
    CHECK(value_of(row, cfg) == s.expected);
  }
}

TEST_CASE("a value out of a row's bounds is refused, naming the key or the "
          "flag",
          "[core][job_options]") {
  for (auto& row : job_options()) {
    if (row.by_hand())
      continue;
    INFO(row.key);
    std::vector<std::pair<json, std::string>> bad; // config value, flag value
    if (!row.words.empty())
      bad.emplace_back("bogus", "bogus");
    std::visit(
      [&](auto access) {
        using access_type = decltype(access);
        if constexpr (!std::is_same_v<access_type, std::monostate>
                      && !std::is_same_v<access_type, word_access>) {
          job_config defaults;
          using value_type = std::remove_reference_t<decltype(access(defaults))>;
          if constexpr (std::is_same_v<value_type, float>) {
            bad.emplace_back(row.max_real * 10, fmt::format("{}", row.max_real * 10));
            bad.emplace_back(row.min_real - 1, fmt::format("{}", row.min_real - 1));
          } else if constexpr (std::is_same_v<value_type, bool>) {
            bad.emplace_back("yes", "maybe");
          } else if constexpr (std::is_integral_v<value_type>) {
            if (row.max < std::numeric_limits<uint64_t>::max())
              bad.emplace_back(row.max + 1, std::to_string(row.max + 1));
            if (row.min > 0)
              bad.emplace_back(row.min - 1, std::to_string(row.min - 1));
          }
        }
      },
      row.field);
    for (auto& [config_value, flag_value] : bad) {
      auto text = config_with(row.key, config_value);
      INFO(text);
      CHECK_THROWS_WITH(parse_job_config(text, "job.json"),
                        Catch::StartsWith("job.json: " + row.key + ": "));
      if (row.flag.empty() || is_switch(row))
        continue;
      job_config cfg;
      INFO(row.flag << " " << flag_value);
      CHECK_THROWS_WITH(set_from_flag(cfg, row, flag_value),
                        Catch::StartsWith(row.flag + ": ")
                          && Catch::Contains(flag_value));
    }
  }
}

TEST_CASE("a flag's value is a whole number, a number, on or off, or one of "
          "the row's words, and the error says which",
          "[core][job_options]") {
  job_config cfg;
  auto set = [&](const char* flag, const char* value) {
    set_from_flag(cfg, *find_job_flag(flag), value);
  };
  CHECK_THROWS_WITH(set("--replication-lag", "many"),
                    "--replication-lag: expected a whole number >= 1, got "
                    "\"many\"");
  CHECK_THROWS_WITH(set("--replication-lag", "0"),
                    "--replication-lag: 0 is out of range [1, 1000000]");
  CHECK_THROWS_WITH(set("--learning-rate", "fast"),
                    "--learning-rate: expected a number, got \"fast\"");
  CHECK_THROWS_WITH(set("--data-channel", "maybe"),
                    "--data-channel: expected on or off, got \"maybe\"");
  CHECK_THROWS_WITH(set("--cpu-affinity", "cores"),
                    "--cpu-affinity: \"cores\": must be \"auto\" or \"none\"");
  CHECK_THROWS_WITH(set("--mode", "bsp"),
                    "--mode: \"bsp\": must be \"async\", \"sync\" or \"ssp\"");
  set("--divergence-factor", "0");
  CHECK(cfg.divergence_factor == 0);
  set("--overlap", "");
  CHECK(cfg.overlap);
}

TEST_CASE("the flags of rows read by hand set what they say",
          "[core][job_options]") {
  job_config cfg;
  auto set = [&](const char* flag, const char* value) {
    set_from_flag(cfg, *find_job_flag(flag), value);
  };
  set("--fault", "kill:worker:1@40");
  set("--fault", "stop:ps:0@100:2.5");
  REQUIRE(cfg.faults.size() == 2);
  CHECK(to_string(cfg.faults[1]) == "stop:ps:0@100:2.5");
  set("--variable-format", "dense_0/kernel=topk:0.01");
  CHECK(cfg.variable_formats.at("dense_0/kernel") == "topk:0.01");
  CHECK_THROWS_WITH(set("--variable-format", "dense_0/kernel"),
                    Catch::Contains("expected VARIABLE=FORMAT"));
  set("--table-policy", "embedding/user.admit_after=3");
  CHECK(cfg.table_overrides.at("embedding/user").at("admit_after") == "3");
  CHECK_THROWS_WITH(set("--table-policy", "embedding/user"),
                    Catch::Contains("expected TABLE.FIELD=VALUE"));
  set("--staleness-aware", "");
  CHECK(cfg.optimizer.staleness_aware);
  CHECK(cfg.table_optimizer.staleness_aware);
  CHECK(cfg.table_optimizer.staleness_aware_chosen);
  set("--tls", "off");
  CHECK(cfg.tls.off);
  set("--tls-ca", "ca.pem"); // names a file: TLS is on again
  CHECK_FALSE(cfg.tls.off);
  CHECK(cfg.tls.ca == "ca.pem");
  set("--tls", "certs");
  CHECK(cfg.tls.dir == "certs");
  CHECK(cfg.tls.ca.empty());
}

TEST_CASE("the config reference has a line for every row, with its flag, "
          "bounds and default",
          "[core][job_options]") {
  auto reference = config_reference();
  for (auto& row : job_options()) {
    INFO(row.key);
    auto line_at = reference.find("\n| `" + row.key + "` |");
    REQUIRE(line_at != std::string::npos);
    auto line = reference.substr(line_at + 1,
                                 reference.find('\n', line_at + 1) - line_at);
    if (!row.flag.empty())
      CHECK_THAT(line, Catch::Contains("`" + row.flag));
    CHECK_THAT(line, Catch::Contains(default_text(row)));
  }
  CHECK_THAT(reference,
             Catch::Contains("| `cluster.replication_lag` | "
                             "`--replication-lag N` | integer | 1 .. 1000000 "
                             "| `16` |"));
  CHECK_THAT(reference,
             Catch::Contains("| `cluster.data_channel` | "
                             "`--data-channel on\\|off` | bool |  | `true` |"));
}

TEST_CASE("the committed docs/reference/config.md is the one the option "
          "table generates",
          "[core][job_options]") {
  const std::string path = ACTORPS_SOURCE_DIR "/docs/reference/config.md";
  std::ifstream in{path};
  std::stringstream committed;
  committed << in.rdbuf();
  if (committed.str() != config_reference())
    FAIL(path << " is not what the option table (core/job_options.cpp) "
                 "generates; regenerate it: build/actorps config-reference > "
                 "docs/reference/config.md");
}
