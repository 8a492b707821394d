#pragma once

// The property every dataset reader's result must have, whatever its input:
// the batch invariants of example_batch::check, keys inside each field's
// vocabulary, labels inside the schema's classes.

#include <string>

#include "core/dataset.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

namespace actorps::fuzz {

/// fail()s unless `ds` (read by `reader`) is a well-formed dataset.
inline void check_dataset(const dataset& ds, const std::string& reader) {
  auto& b = ds.examples;
  try {
    b.check(reader);
  } catch (const input_error& e) {
    fail(reader + " returned a malformed batch: " + e.what());
  }
  check(b.fields.size() == ds.schema.fields.size(),
        "a dataset's batch and schema have different field counts");
  check(b.dense_dim == ds.schema.dense_dim,
        "a dataset's batch and schema have different dense widths");
  for (size_t f = 0; f < b.fields.size(); ++f) {
    auto vocabulary = ds.schema.fields[f].vocabulary;
    if (vocabulary == 0)
      continue;
    for (auto key : b.fields[f].keys)
      check(key < vocabulary, "a dataset holds a key outside its vocabulary");
  }
  for (auto label : b.labels)
    check(label >= 0 && static_cast<uint32_t>(label) < ds.schema.classes,
          "a dataset holds a label outside its classes");
}

} // namespace actorps::fuzz
