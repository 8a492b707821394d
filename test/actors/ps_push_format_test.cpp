// Encoded pushes (push_request::format, core/wire_format.hpp): a server
// decodes them before anything else and applies them as plain pushes; a
// malformed one is refused with errc::bad_message and changes nothing.

#include <vector>

#include <catch2/catch.hpp>

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config plain_sgd() {
  return optimizer_config{"sgd", 1.0f, {}};
}

/// A push of closure `closure` whose gradient is `grad` encoded as `spec`.
push_request encoded_push(const std::string& spec, uint64_t closure,
                          const std::vector<float>& grad) {
  auto req = make_push(0, closure, {});
  auto f = make_wire_format(spec);
  req.format = f->name();
  f->encode(grad.data(), grad.size(), req.encoded, nullptr);
  return req;
}

} // namespace

TEST_CASE_METHOD(deterministic,
                 "a server applies a bf16 or top-k push as the decoded "
                 "gradient",
                 "[actors][ps][wire]") {
  auto ps = spawn(options(plain_sgd(), plain_sgd()));
  create(ps, dense_shard("w", 1, 4, {0, 0, 0, 0}));
  // 0.1 is not a bf16 value: the server applies its bf16 rounding.
  CHECK(push(ps, encoded_push("bf16", 1, {1.0f, -2.0f, 0.1f, 0.0f})) == 1);
  auto v = as_vector(pull(ps, dense_pull()).values.values);
  CHECK(v[0] == -1.0f);
  CHECK(v[1] == 2.0f);
  CHECK(v[2] == Approx(-0.1f).epsilon(1.0 / 256));
  CHECK(v[2] != -0.1f);
  CHECK(v[3] == 0.0f);
  // Top-2 of {3, -1, 0.5, -4}: only -4 and 3 move their weights.
  CHECK(push(ps, encoded_push("topk:2", 2, {3.0f, -1.0f, 0.5f, -4.0f})) == 2);
  v = as_vector(pull(ps, dense_pull()).values.values);
  CHECK(v[0] == -4.0f);
  CHECK(v[1] == 2.0f);
  CHECK(v[3] == 4.0f);
  auto s = stats(ps);
  CHECK(s.pushes == 2);
}

TEST_CASE_METHOD(deterministic,
                 "a malformed encoded push is refused with bad_message and "
                 "changes nothing",
                 "[actors][ps][wire]") {
  auto ps = spawn(options(plain_sgd(), plain_sgd()));
  create(ps, dense_shard("w", 1, 4, {1, 2, 3, 4}));
  auto refused = [&](push_request req) {
    return refusal<uint64_t>(ps, push_atom_v, std::move(req));
  };
  // Encoded for 3 floats, the region holds 4.
  CHECK(refused(encoded_push("bf16", 1, {1, 2, 3})) == errc::bad_message);
  // A format no server knows.
  auto unknown = encoded_push("bf16", 2, {1, 2, 3, 4});
  unknown.format = "fp8";
  CHECK(refused(unknown) == errc::bad_message);
  // Floats and an encoding at once.
  auto both = encoded_push("fp16", 3, {1, 2, 3, 4});
  both.gradient = floats({1, 2, 3, 4});
  CHECK(refused(both) == errc::bad_message);
  // A top-k payload with an index out of range.
  auto topk = encoded_push("topk:1", 4, {0, 0, 0, 9});
  topk.encoded.bytes[0] = 7; // index 3 -> 7
  CHECK(refused(topk) == errc::bad_message);
  CHECK(as_vector(pull(ps, dense_pull()).values.values)
        == std::vector<float>{1, 2, 3, 4});
  CHECK(stats(ps).pushes == 0);
}

TEST_CASE_METHOD(deterministic,
                 "a pull that names a format gets its dense values encoded; "
                 "one with error feedback is refused",
                 "[actors][ps][wire]") {
  auto ps = spawn(options(plain_sgd(), plain_sgd()));
  create(ps, dense_shard("w", 1, 4, {1.0f, -2.0f, 0.1f, 65536.0f}));
  auto req = dense_pull();
  req.format = "fp16";
  auto r = pull(ps, req);
  CHECK(r.values.values.empty());
  CHECK(r.format == "fp16");
  CHECK(r.encoded.bytes.size() == 4 * 2);
  std::vector<float> v(4);
  make_wire_format("fp16")->decode(r.encoded, v.data(), v.size());
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == -2.0f);
  CHECK(v[2] == Approx(0.1f).epsilon(1.0 / 2048));
  CHECK(v[3] == 65504.0f); // fp16 saturates
  req.format = "topk:1";
  CHECK(refusal<pull_reply>(ps, pull_atom_v, req) == errc::bad_message);
  req.format = "fp8";
  CHECK(refusal<pull_reply>(ps, pull_atom_v, req) == errc::bad_message);
}
