// The predict request parser (cluster/serve/predict_request.hpp): each
// shape of a good request into its batch, each bad one to its status and a
// message naming the problem.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cluster/serve/predict_request.hpp"
#include "test/cluster/serve_double.hpp"

using namespace actorps;

namespace {

struct good_case {
  const char* what;
  const char* body;
  bool dense_only;
  uint64_t rows;
  std::vector<float> dense;
  std::vector<uint64_t> user_offsets;
  std::vector<uint64_t> user_keys;
  std::vector<uint64_t> tag_keys;
  std::vector<float> tag_values;
};

struct bad_case {
  const char* what;
  const char* body;
  bool dense_only;
  int status;
  /// A part of the message.
  const char* says;
};

} // namespace

TEST_CASE("every documented request shape becomes the batch it describes", "[serve]") {
  const std::vector<good_case> cases = {
    {"a dense-only model takes bare lists", R"({"instances": [[1, 2, 3], [4.5, 5, 6]]})",
     true, 2, {1, 2, 3, 4.5f, 5, 6}, {}, {}, {}, {}},
    {"a dense-only model takes objects too", R"({"instances": [{"dense": [1, 2, 3]}]})",
     true, 1, {1, 2, 3}, {}, {}, {}, {}},
    {"columnar inputs as a list", R"({"inputs": [[1, 2, 3]]})", true, 1,
     {1, 2, 3}, {}, {}, {}, {}},
    {"columnar named inputs", R"({"inputs": {"dense": [[1, 2], [3, 4]], "user": [1, [2, 3]]}})",
     false, 2, {1, 2, 3, 4}, {0, 1, 3}, {1, 2, 3}, {}, {}},
    {"a key, a list of keys, a left-out field",
     R"({"signature_name": "serving_default", "instances": [{"dense": [0, 1], "user": 7}, {"dense": [2, 3], "user": [1, 9]}, {"dense": [4, 5]}]})",
     false, 3, {0, 1, 2, 3, 4, 5}, {0, 1, 3, 3}, {7, 1, 9}, {}, {}},
    {"a weighted field as an object, as pairs, as bare keys",
     R"({"instances": [{"dense": [0, 0], "tags": {"5": 0.5, "18446744073709551615": 2}}, {"dense": [0, 0], "tags": [[3, 1.5], 4]}]})",
     // (an object's keys in the order of their text)
     false, 2, {0, 0, 0, 0}, {0, 0, 0}, {}, {18446744073709551615ull, 5, 3, 4},
     {2, 0.5f, 1.5f, 1}},
  };
  for (auto& c : cases) {
    INFO(c.what);
    auto b = parse_predict_request(c.body, test::double_schema(c.dense_only));
    REQUIRE_NOTHROW(b.check("parsed"));
    CHECK(b.rows == c.rows);
    CHECK(b.dense == c.dense);
    if (c.dense_only) {
      CHECK(b.fields.empty());
      continue;
    }
    REQUIRE(b.fields.size() == 2);
    CHECK(b.fields[0].offsets == c.user_offsets);
    CHECK(b.fields[0].keys == c.user_keys);
    CHECK(b.fields[0].values.empty());
    CHECK(b.fields[1].keys == c.tag_keys);
    CHECK(b.fields[1].values == c.tag_values);
  }
}

TEST_CASE("a bad request is refused with its status and a message naming the problem", "[serve]") {
  const std::vector<bad_case> cases = {
    {"malformed JSON", R"({"instances": [[1, 2, 3])", true, 400, "malformed JSON"},
    {"a number beyond a double", R"({"instances": [[1, 2, 1E16666]]})", true, 400, "malformed JSON: number overflow"},
    {"not UTF-8", "{\"instances\": [\"\xff\"]}", true, 400, "malformed JSON"},
    {"not an object", "[1, 2, 3]", true, 400, "expected an object"},
    {"no instances", R"({"signature_name": "serving_default"})", true, 400, "no \"instances\""},
    {"an empty list", R"({"instances": []})", true, 400, "no instances"},
    {"both forms", R"({"instances": [[1,2,3]], "inputs": [[1,2,3]]})", true, 400, "both"},
    {"an unknown member", R"({"instancez": [[1,2,3]]})", true, 400, "unknown member \"instancez\""},
    {"another signature", R"({"signature_name": "x", "instances": [[1,2,3]]})", true, 400, "signature_name"},
    {"too few dense features", R"({"instances": [[1, 2]]})", true, 400, "instance 0: 2 dense features; this model takes 3"},
    {"a string feature", R"({"instances": [[1, 2, 3], [1, "a", 3]]})", true, 400, "instance 1: dense feature 1 is \"a\""},
    {"a float overflow", R"({"instances": [[1, 2, 1e39]]})", true, 400, "dense feature 2 is 1e+39"},
    {"a bare list with fields", R"({"instances": [[1, 2]]})", false, 400, "instance 0: is a list"},
    {"no dense", R"({"instances": [{"user": 1}]})", false, 400, "has no \"dense\""},
    {"an unknown input", R"({"instances": [{"dense": [1, 2], "usr": 1}]})", false, 400, "unknown input \"usr\" (this model takes dense (2 floats), user, tags)"},
    {"a key outside the vocabulary", R"({"instances": [{"dense": [1, 2], "user": [1, 10]}]})", false, 400, "instance 0: field \"user\": key 10 is outside its vocabulary [0, 10)"},
    {"a negative key", R"({"instances": [{"dense": [1, 2], "user": -1}]})", false, 400, "key -1 is not an integer >= 0"},
    {"a fractional key", R"({"instances": [{"dense": [1, 2], "user": 1.5}]})", false, 400, "key 1.5 is not an integer >= 0"},
    {"a key beyond 64 bits", R"({"instances": [{"dense": [1, 2], "tags": {"18446744073709551616": 1}}]})", false, 400, "is not an integer >= 0 in decimal"},
    {"values on an unweighted field", R"({"instances": [{"dense": [1, 2], "user": {"1": 2}}]})", false, 400, "field \"user\" has no values"},
    {"a pair of three", R"({"instances": [{"dense": [1, 2], "tags": [[1, 2, 3]]}]})", false, 400, "a [key, value] pair has 3 entries"},
    {"a string value", R"({"instances": [{"dense": [1, 2], "tags": {"1": "x"}}]})", false, 400, "value \"x\" is not a finite float"},
    {"a field of the wrong type", R"({"instances": [{"dense": [1, 2], "user": "7"}]})", false, 400, "field \"user\" is \"7\""},
    {"columns of unequal length", R"({"inputs": {"dense": [[1, 2], [3, 4]], "user": [1]}})", false, 400, "\"user\" has 1 entries"},
    {"too deep", R"({"instances": [[[[[[[[[[1]]]]]]]]]]})", true, 400, "nested deeper than 8"},
    {"too many instances", R"({"instances": [[1,2,3],[1,2,3],[1,2,3]]})", true, 413, "3 instances; at most 2"},
    {"too many columnar instances", R"({"inputs": {"dense": [[1,2,3],[1,2,3],[1,2,3]]}})", true, 413, "3 instances; at most 2"},
  };
  request_limits limits;
  limits.max_instances = 2;
  for (auto& c : cases) {
    INFO(c.what);
    try {
      parse_predict_request(c.body, test::double_schema(c.dense_only), limits);
      FAIL("accepted");
    } catch (const request_error& e) {
      CHECK(e.status() == c.status);
      CHECK_THAT(e.what(), Catch::Contains(c.says));
    }
  }
}

TEST_CASE("brackets inside strings do not count toward the nesting limit", "[serve]") {
  request_limits limits;
  limits.max_depth = 3;
  auto body = std::string{R"({"instances": [[1, 2, 3]], "x": "[[[[[[[["})"};
  try {
    parse_predict_request(body, test::double_schema(true), limits);
    FAIL("accepted");
  } catch (const request_error& e) {
    // Refused for its unknown member, not for depth.
    CHECK_THAT(e.what(), Catch::Contains("unknown member \"x\""));
  }
}

TEST_CASE("predictions are written one number per binary instance and a list per multiclass one", "[serve]") {
  std::vector<float> p = {0.25f, 0.75f, 1.0f / 3, 2.0f / 3};
  CHECK(predictions_json(p.data(), 4, 1)
        == R"({"predictions": [0.25, 0.75, 0.33333334, 0.6666667]})");
  CHECK(predictions_json(p.data(), 2, 2)
        == R"({"predictions": [[0.25, 0.75], [0.33333334, 0.6666667]]})");
  float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(predictions_json(&nan, 1, 1) == R"({"predictions": [null]})");
  CHECK(error_json("bad \"x\"\n") == R"({"error":"bad \"x\"\n"})");
}
