// Fuzz target: a job config (JSON) as `actorps train --config` reads it.
//
// Property: parse_job_config either returns a config or throws input_error;
// so do validate() and opening its dataset (which checks the data section's
// options without reading files). Every fault it holds renders as text that
// parse_fault reads back unchanged.

#include <cstddef>
#include <cstdint>

#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  job_config cfg;
  try {
    cfg = parse_job_config(fuzz::as_string(data, size), "fuzz.json");
  } catch (const input_error&) {
    return 0;
  }
  for (auto& f : cfg.faults) {
    auto text = to_string(f);
    fault_spec back;
    try {
      back = parse_fault(text);
    } catch (const input_error& e) {
      fuzz::fail("a parsed fault does not read back: " + text + ": "
                 + e.what());
    }
    fuzz::check(to_string(back) == text, "a fault changes in a round trip");
  }
  try {
    validate(cfg);
    open_dataset(cfg);
  } catch (const input_error&) {
    // A clear refusal: what the app prints.
  }
  return 0;
}
