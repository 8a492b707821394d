// Fuzz target: a fault spec as `--fault` and the job config's "faults" array
// give it ("kill:worker:1@40", "delay:ps:20%@50:0.05", "move:ps:0>2@300").
//
// Properties: parse_fault returns a spec or throws input_error; the index
// of a spec it returns is the number written (not cut to 32 bits); the
// spec renders (to_string) as text that parses to the same spec.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/job_config.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fault_spec f;
  try {
    f = parse_fault(fuzz::as_string(data, size));
  } catch (const input_error&) {
    return 0;
  }
  auto written = fuzz::as_string(data, size);
  // A join names no index (the next one); drop and delay a share; a move
  // two servers.
  if (f.action != fault_spec::kind::drop && f.action != fault_spec::kind::delay
      && f.action != fault_spec::kind::move
      && f.action != fault_spec::kind::join) {
    auto head = written.substr(0, written.find('@'));
    auto digits = head.substr(head.rfind(':') + 1);
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size() - 1));
    fuzz::check(digits == std::to_string(f.index),
                "parse_fault's index differs from the number written");
  }
  auto text = to_string(f);
  fault_spec back;
  try {
    back = parse_fault(text);
  } catch (const input_error& e) {
    fuzz::fail("a parsed fault does not read back: " + text + ": " + e.what());
  }
  fuzz::check(back.action == f.action && back.role == f.role
                && back.index == f.index && back.step == f.step
                && back.seconds == f.seconds && back.share == f.share
                && back.to == f.to,
              "a fault changes in a round trip");
  return 0;
}
