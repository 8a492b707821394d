// Fuzz target: the body of a prediction request as `actorps serve` reads it
// from the network (cluster/serve/predict_request.hpp: TensorFlow Serving's
// {"instances": [...]} and {"inputs": ...} shapes).
//
// Input: the first byte picks the model's schema (bit 0: dense-only with 3
// features, else 2 dense features, a field "user" of vocabulary 10 and an
// unbounded weighted field "tags"; bit 1: at most 2 instances, else 1024);
// the rest is the body.
//
// Properties: parse_predict_request returns a batch or throws
// request_error, with status 400 or 413 and a message that error_json
// writes as JSON that reads back. A batch passes example_batch::check, has
// 1 .. max_instances rows, the schema's dense width and fields, finite
// dense features and values, keys inside each fixed vocabulary, and values
// exactly for the weighted field; the predictions JSON written for its
// rows parses.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cluster/serve/predict_request.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

data_schema fuzz_schema(bool dense_only) {
  data_schema s;
  if (dense_only) {
    s.dense_dim = 3;
  } else {
    s.dense_dim = 2;
    s.fields = {field_schema{"user", 10, false},
                field_schema{"tags", 0, true}};
  }
  return s;
}

void check_error(const request_error& e) {
  fuzz::check(e.status() == 400 || e.status() == 413,
              "a request error with a status other than 400 or 413");
  std::string what = e.what();
  fuzz::check(!what.empty(), "a request error without a message");
  auto j = nlohmann::json::parse(error_json(what), nullptr, false);
  fuzz::check(j.is_object() && j.contains("error") && j["error"].is_string(),
              "error_json wrote something that is not {\"error\": string}");
}

void check_batch(const example_batch& b, const data_schema& s,
                 const request_limits& limits) {
  try {
    b.check("fuzzed batch");
  } catch (const input_error& e) {
    fuzz::fail(std::string{"a parsed batch breaks its invariants: "}
               + e.what());
  }
  fuzz::check(b.rows >= 1 && b.rows <= limits.max_instances,
              "a batch with no rows or more than max_instances");
  fuzz::check(b.dense_dim == s.dense_dim, "a batch of another dense width");
  fuzz::check(b.dense_bytes.empty(), "a batch of dense bytes");
  fuzz::check(b.fields.size() == s.fields.size(),
              "a batch with another number of fields");
  for (float x : b.dense)
    fuzz::check(std::isfinite(x), "a dense feature that is not finite");
  for (size_t f = 0; f < b.fields.size(); ++f) {
    const auto& fld = b.fields[f];
    const auto& fs = s.fields[f];
    for (auto k : fld.keys)
      fuzz::check(fs.vocabulary == 0 || k < fs.vocabulary,
                  "a key outside its field's vocabulary");
    fuzz::check(fs.weighted ? fld.values.size() == fld.keys.size()
                            : fld.values.empty(),
                "values on an unweighted field or missing on a weighted one");
    for (float x : fld.values)
      fuzz::check(std::isfinite(x), "a value that is not finite");
  }
  std::vector<float> p(b.rows * 2, 0.5f);
  auto out = nlohmann::json::parse(predictions_json(p.data(), b.rows, 2),
                                   nullptr, false);
  fuzz::check(out.is_object() && out["predictions"].size() == b.rows,
              "the predictions JSON does not parse or has another length");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto mode = in.u8();
  auto body = in.rest();
  auto schema = fuzz_schema((mode & 1) != 0);
  request_limits limits;
  if ((mode & 2) != 0)
    limits.max_instances = 2;
  try {
    auto b = parse_predict_request(body, schema, limits);
    check_batch(b, schema, limits);
  } catch (const request_error& e) {
    check_error(e);
  }
  return 0;
}
