#include "core/options.hpp"

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.hpp"

using namespace actorps;

TEST_CASE("option_reader returns the fallback for a missing field",
          "[core][options]") {
  option_map none;
  option_reader opts{none, "model", "mlp"};
  CHECK(opts.get_uint("width", 7, 1, 10) == 7);
  CHECK(opts.get_real("rate", 0.5, 0, 1) == 0.5);
  CHECK(opts.get_bool("flag", true));
  CHECK(opts.get_string("kind", "a") == "a");
  CHECK(opts.get_uints("sizes", {1, 2}, 0, 9) == std::vector<uint64_t>{1, 2});
  CHECK_FALSE(opts.has("width"));
  CHECK_NOTHROW(opts.finish());
}

TEST_CASE("option_reader parses the JSON text of each field",
          "[core][options]") {
  option_map m{{"width", "16"},
               {"big", "1e7"},
               {"rate", "0.25"},
               {"whole_rate", "2"},
               {"flag", "false"},
               {"kind", "\"adam\""},
               {"sizes", "[3, 4,5]"},
               {"empty", "[]"}};
  option_reader opts{m, "data", "x"};
  CHECK(opts.has("width"));
  CHECK(opts.get_uint("width", 0, 1, 100) == 16);
  CHECK(opts.get_uint("big", 0, 1, 100'000'000) == 10'000'000);
  CHECK(opts.get_real("rate", 0, 0, 1) == 0.25);
  CHECK(opts.get_real("whole_rate", 0, 0, 10) == 2.0);
  CHECK_FALSE(opts.get_bool("flag", true));
  CHECK(opts.get_string("kind", "", {"sgd", "adam"}) == "adam");
  CHECK(opts.get_uints("sizes", {}, 0, 9) == std::vector<uint64_t>{3, 4, 5});
  CHECK(opts.get_uints("empty", {1}, 0, 9).empty());
  CHECK_NOTHROW(opts.finish());
}

TEST_CASE("option_reader names section and field in every error",
          "[core][options]") {
  struct bad_case {
    std::string text;
    std::string message;
    int getter; // 0 uint, 1 real, 2 bool, 3 string, 4 uints
  };
  const std::vector<bad_case> cases{
    {"\"16\"", "data.f: must be a whole number, got \"16\"", 0},
    {"1.5", "data.f: must be a whole number, got 1.5", 0},
    {"-3", "data.f: -3 is out of range [1, 100]", 0},
    {"101", "data.f: 101 is out of range [1, 100]", 0},
    {"0", "data.f: 0 is out of range [1, 100]", 0},
    {"{", "data.f: must be a whole number, got {", 0},
    {"true", "data.f: must be a number, got true", 1},
    {"1.5", "data.f: 1.5 is out of range [0, 1]", 1},
    {"1", "data.f: must be true or false, got 1", 2},
    {"\"yes\"", "data.f: must be true or false", 2},
    {"adam", "data.f: must be a string, got adam", 3},
    {"\"rmsprop\"", "data.f: \"rmsprop\" is not one of: sgd, adam", 3},
    {"5", "data.f: must be an array of whole numbers, got 5", 4},
    {"[1, \"2\"]", "data.f: element 1 must be a whole number, got \"2\"", 4},
    {"[1, -2]", "data.f: element 1 (-2) is out of range [0, 9]", 4},
    {"[1, 10]", "data.f: element 1 (10) is out of range [0, 9]", 4},
  };
  for (auto& c : cases) {
    INFO(c.text);
    option_map m{{"f", c.text}};
    option_reader opts{m, "data", "x"};
    auto call = [&] {
      switch (c.getter) {
        case 0:
          opts.get_uint("f", 0, 1, 100);
          break;
        case 1:
          opts.get_real("f", 0, 0, 1);
          break;
        case 2:
          opts.get_bool("f", false);
          break;
        case 3:
          opts.get_string("f", "", {"sgd", "adam"});
          break;
        default:
          opts.get_uints("f", {}, 0, 9);
      }
    };
    CHECK_THROWS_AS(call(), input_error);
    CHECK_THROWS_WITH(call(), Catch::StartsWith(c.message));
  }
}

TEST_CASE("finish() names the first field nobody read", "[core][options]") {
  option_map m{{"dimension", "8"}, {"embedding_dim", "16"}};
  option_reader opts{m, "model", "embedding_mlp"};
  opts.get_uint("embedding_dim", 8, 1, 4096);
  CHECK_THROWS_AS(opts.finish(), input_error);
  CHECK_THROWS_WITH(opts.finish(),
                    "model.dimension: unknown field for embedding_mlp");
  // A field asked for counts as read even when it was absent, and one that
  // was only tested with has() does not.
  option_map only{{"a", "1"}};
  option_reader probe{only, "data", "y"};
  CHECK(probe.has("a"));
  CHECK_THROWS_WITH(probe.finish(), "data.a: unknown field for y");
  probe.get_uint("a", 0, 0, 9);
  CHECK_NOTHROW(probe.finish());
}

TEST_CASE("to_string of an option map is canonical JSON sorted by name",
          "[core][options]") {
  CHECK(to_string(option_map{}).empty());
  option_map a{{"b", "[2, 3]"}, {"a", "1"}, {"c", "\"x y\""}};
  option_map b{{"c", " \"x y\" "}, {"b", "[2,3]"}, {"a", "1"}};
  CHECK(to_string(a) == "a=1 b=[2,3] c=\"x y\"");
  CHECK(to_string(a) == to_string(b));
  option_map raw{{"z", "not json"}};
  CHECK(to_string(raw) == "z=not json");
}
