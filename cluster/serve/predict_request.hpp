#pragma once

// The body of a prediction request, TensorFlow Serving's REST shapes
// (https://www.tensorflow.org/tfx/serving/api_rest#predict_api), turned
// into an example_batch of a model's data_schema, and the answer turned
// back into JSON. No sockets here: the server (prediction_server.hpp) hands
// the bytes in; the fuzz target fuzz/predict_request_fuzz.cpp hands in
// anything.
//
// Request (one of):
//   {"instances": [INSTANCE, ...]}                 row format
//   {"inputs": [INSTANCE, ...]}                    the same, columnar name
//   {"inputs": {"NAME": [VALUE, ...], ...}}        columnar: each named
//        input a list with one VALUE per instance (instance i takes
//        {"NAME": VALUE[i], ...})
// optionally with "signature_name": "serving_default".
//
// INSTANCE, for a schema of dense_dim D and sparse fields F1..Fn:
//   {"dense": [x1, ..., xD], "F1": KEYS, ...}  dense required when D > 0;
//        a field left out has no keys in that instance
//   [x1, ..., xD]                              only when the model has no
//        sparse fields
// KEYS of a field: a key (integer >= 0), a list of keys; for a weighted
// field also {"KEY": value, ...} (KEY in decimal) or [[key, value], ...]
// (a key alone weighs 1). A key of a field with a fixed vocabulary V must
// be < V.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/example_batch.hpp"

namespace actorps {

/// Why a request cannot be answered: the HTTP status to answer with (400
/// bad request, 413 too large) and a one-line message naming the problem
/// (the instance, the field, the key), for `{"error": MESSAGE}`.
class request_error : public std::runtime_error {
public:
  request_error(int status, const std::string& what)
    : std::runtime_error(what), status_(status) {
    // nop
  }

  int status() const noexcept {
    return status_;
  }

private:
  int status_;
};

/// What one request may hold.
struct request_limits {
  /// Instances per request; more: 413.
  uint64_t max_instances = 1024;
  /// Nesting of arrays and objects; deeper: 400 (a valid request nests at
  /// most 5 deep: body, inputs, instance, field, [key, value]).
  uint32_t max_depth = 8;
};

/// Parses a predict request `body` (UTF-8 JSON, the shapes above) into a
/// batch of `schema`'s shape: rows = instances, dense row-major rows x
/// schema.dense_dim floats, one CSR field per schema field in its order
/// (values only for weighted fields), labels 0.
/// @throws request_error 400 naming the problem: malformed JSON (with its
///         position), nesting deeper than limits.max_depth, a member other
///         than instances / inputs / signature_name, no instances, a wrong
///         number or type of dense features, an unknown input name, a key
///         that is negative, not an integer or outside the field's
///         vocabulary ("instance 2: field \"user\": key 700 is outside its
///         vocabulary [0, 611)"), a value that is not a finite float; 413
///         for more than limits.max_instances instances.
example_batch parse_predict_request(std::string_view body,
                                    const data_schema& schema,
                                    const request_limits& limits = {});

/// `{"predictions": [...]}` for `rows` examples of `outputs` floats each
/// (row-major in `p`): one number per instance when outputs is 1 (a binary
/// model's probability), a list of `outputs` numbers otherwise. Each float
/// is written in its shortest form that reads back as the same float.
std::string predictions_json(const float* p, uint64_t rows, uint32_t outputs);

/// `{"error": MESSAGE}` (TensorFlow Serving's error body), MESSAGE escaped
/// as a JSON string.
std::string error_json(std::string_view message);

} // namespace actorps
