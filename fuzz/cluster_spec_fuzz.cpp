// Fuzz target: a cluster spec (TF_CONFIG-shaped JSON, from a file or the
// TF_CONFIG variable) and a single "host:port" address.
//
// Input: the first byte picks what is parsed (even: a cluster spec; odd: the
// rest as one address); the rest is the text.
//
// Properties: parse_cluster_spec and parse_host_port return a value or
// throw input_error. A spec they return passes validate(), serialises
// (to_json) to text that parses to an equal spec, and so does every address
// (to_string). Reading the same text from TF_CONFIG gives the same spec.

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cluster/spec/cluster_spec.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

void address_round_trip(const host_port& hp) {
  auto text = to_string(hp);
  try {
    fuzz::check(parse_host_port(text) == hp, "an address changes in a round "
                                             "trip");
  } catch (const input_error& e) {
    fuzz::fail("a parsed address does not read back: " + text + ": "
               + e.what());
  }
}

void fuzz_spec(const std::string& text) {
  cluster_spec spec;
  try {
    spec = parse_cluster_spec(text, "fuzz.json");
  } catch (const input_error&) {
    return;
  }
  try {
    validate(spec, "fuzz.json");
  } catch (const input_error& e) {
    fuzz::fail(std::string{"a parsed spec does not validate: "} + e.what());
  }
  for (const char* role : {"chief", "worker", "ps", "evaluator"})
    for (auto& hp : spec.members(role))
      address_round_trip(hp);
  auto json = spec.to_json();
  try {
    fuzz::check(parse_cluster_spec(json, "to_json") == spec,
                "a spec changes in a round trip through to_json");
  } catch (const input_error& e) {
    fuzz::fail("to_json gives a spec that does not parse: " + json + ": "
               + e.what());
  }
  // TF_CONFIG: the same parser behind getenv. A NUL ends the variable.
  if (text.find('\0') == std::string::npos && !text.empty()) {
    ::setenv("ACTORPS_FUZZ_TF_CONFIG", text.c_str(), 1);
    fuzz::check(cluster_spec_from_env("ACTORPS_FUZZ_TF_CONFIG") == spec,
                "TF_CONFIG reads differently from the same text");
  }
}

void fuzz_address(const std::string& text) {
  host_port hp;
  try {
    hp = parse_host_port(text);
  } catch (const input_error&) {
    return;
  }
  fuzz::check(!hp.host.empty() && hp.port != 0,
              "parse_host_port accepted an empty host or port 0");
  address_round_trip(hp);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto mode = in.u8();
  auto text = in.rest();
  if (mode % 2 == 0)
    fuzz_spec(text);
  else
    fuzz_address(text);
  return 0;
}
