// Encoded pushes (push_request::parts, core/wire_format.hpp): a server
// decodes them before anything else and applies them as plain pushes; a
// malformed one is refused with errc::bad_message and changes nothing.

#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "test/actors/ps_fixture.hpp"

using namespace actorps;
using namespace actorps::test;

namespace {

optimizer_config plain_sgd() {
  return optimizer_config{"sgd", 1.0f, {}};
}

/// Part [offset, offset + n) of `grad` encoded as `spec`.
encoded_part part_of(const std::string& spec, const std::vector<float>& grad,
                     uint64_t offset, uint64_t n) {
  encoded_part part;
  auto f = make_wire_format(spec);
  part.offset = offset;
  part.format = f->name();
  f->encode(grad.data() + offset, n, part.tensor, nullptr);
  return part;
}

/// A push of closure `closure` whose gradient is `grad` encoded as `spec`.
push_request encoded_push(const std::string& spec, uint64_t closure,
                          const std::vector<float>& grad) {
  auto req = make_push(0, closure, {});
  req.parts.push_back(part_of(spec, grad, 0, grad.size()));
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
  // Runs in two formats: floats [0, 2) as fp32, [2, 4) as bf16.
  std::vector<float> g{0.5f, 0.25f, 0.1f, -1.0f};
  auto mixed = make_push(0, 3, {});
  mixed.parts = {part_of("fp32", g, 0, 2), part_of("bf16", g, 2, 2)};
  CHECK(push(ps, mixed) == 3);
  auto w = as_vector(pull(ps, dense_pull()).values.values);
  CHECK(w[0] == v[0] - 0.5f);
  CHECK(w[1] == v[1] - 0.25f);
  CHECK(w[2] == Approx(v[2] - 0.1f).epsilon(1.0 / 256));
  CHECK(w[2] != v[2] - 0.1f);
  CHECK(w[3] == v[3] + 1.0f);
  auto s = stats(ps);
  CHECK(s.pushes == 3);
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
  unknown.parts[0].format = "fp8";
  CHECK(refused(unknown) == errc::bad_message);
  // Floats and an encoding at once.
  auto both = encoded_push("fp16", 3, {1, 2, 3, 4});
  both.gradient = floats({1, 2, 3, 4});
  CHECK(refused(both) == errc::bad_message);
  // A top-k payload with an index out of range.
  auto topk = encoded_push("topk:1", 4, {0, 0, 0, 9});
  topk.parts[0].tensor.bytes[0] = 7; // index 3 -> 7
  CHECK(refused(topk) == errc::bad_message);
  // Parts that leave a gap, overlap, or stop short of the region.
  std::vector<float> g{1, 2, 3, 4};
  auto gap = make_push(0, 5, {});
  gap.parts = {part_of("fp32", g, 0, 2), part_of("bf16", g, 3, 1)};
  CHECK(refused(gap) == errc::bad_message);
  auto overlap = make_push(0, 6, {});
  overlap.parts = {part_of("fp32", g, 0, 2), part_of("bf16", g, 1, 3)};
  CHECK(refused(overlap) == errc::bad_message);
  auto short_of = make_push(0, 7, {});
  short_of.parts = {part_of("fp32", g, 0, 2), part_of("bf16", g, 2, 1)};
  CHECK(refused(short_of) == errc::bad_message);
  CHECK(as_vector(pull(ps, dense_pull()).values.values)
        == std::vector<float>{1, 2, 3, 4});
  CHECK(stats(ps).pushes == 0);
}

TEST_CASE_METHOD(deterministic,
                 "a pull that names a format gets its dense values encoded "
                 "(fp16, int8), a sparse one (top-k) is refused",
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
  // int8 (error feedback for pushes) quantizes pulled values as they are:
  // within max |x| / 254 of the block.
  req.format = "int8";
  r = pull(ps, req);
  CHECK(r.format == "int8");
  CHECK(r.encoded.bytes.size() == 4 + 4);
  make_wire_format("int8")->decode(r.encoded, v.data(), v.size());
  CHECK(v[3] == 65536.0f);
  CHECK(std::fabs(v[0] - 1.0f) <= 65536.0f / 254);
  CHECK(std::fabs(v[1] + 2.0f) <= 65536.0f / 254);
  req.format = "topk:1";
  CHECK(refusal<pull_reply>(ps, pull_atom_v, req) == errc::bad_message);
  req.format = "fp8";
  CHECK(refusal<pull_reply>(ps, pull_atom_v, req) == errc::bad_message);
}
