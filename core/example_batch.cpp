#include "core/example_batch.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

void example_batch::reset(uint64_t dim, size_t num_fields) {
  // clear() and assign() keep the capacity, so a batch that is refilled
  // every step allocates only while it grows to its largest size.
  rows = 0;
  dense_dim = dim;
  dense.clear();
  dense_bytes.clear();
  byte_scale = 1.0f;
  fields.resize(num_fields);
  for (auto& f : fields) {
    f.offsets.assign(1, 0);
    f.keys.clear();
    f.values.clear();
  }
  labels.clear();
}

void example_batch::append_row(const example_batch& src, uint64_t r) {
  if (src.dense_bytes.empty()) {
    const auto* row = src.dense.data() + r * src.dense_dim;
    dense.insert(dense.end(), row, row + src.dense_dim);
  } else {
    const auto* row = src.dense_bytes.data() + r * src.dense_dim;
    auto at = dense.size();
    dense.resize(at + src.dense_dim);
    auto* out = dense.data() + at;
    const auto scale = src.byte_scale;
    for (uint64_t d = 0; d < src.dense_dim; ++d)
      out[d] = static_cast<float>(row[d]) * scale;
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    const auto& from = src.fields[f];
    auto& to = fields[f];
    auto first = from.offsets[r];
    auto last = from.offsets[r + 1];
    to.keys.insert(to.keys.end(), from.keys.begin() + first,
                   from.keys.begin() + last);
    if (!from.values.empty())
      to.values.insert(to.values.end(), from.values.begin() + first,
                       from.values.begin() + last);
    to.offsets.push_back(to.keys.size());
  }
  labels.push_back(src.labels[r]);
  ++rows;
}

void example_batch::check(const std::string& what) const {
  if (!dense_bytes.empty()) {
    if (!dense.empty())
      throw input_error(fmt::format("{}: {} dense values as floats and {} as "
                                    "bytes (expected one form)",
                                    what, dense.size(), dense_bytes.size()));
    if (dense_bytes.size() != rows * dense_dim)
      throw input_error(fmt::format("{}: {} dense bytes for {} rows x {} "
                                    "features (expected {})",
                                    what, dense_bytes.size(), rows, dense_dim,
                                    rows * dense_dim));
  } else if (dense.size() != rows * dense_dim) {
    throw input_error(fmt::format("{}: {} dense values for {} rows x {} "
                                  "features (expected {})",
                                  what, dense.size(), rows, dense_dim,
                                  rows * dense_dim));
  }
  if (labels.size() != rows)
    throw input_error(fmt::format("{}: {} labels for {} rows", what,
                                  labels.size(), rows));
  for (size_t f = 0; f < fields.size(); ++f) {
    const auto& fld = fields[f];
    if (fld.offsets.size() != rows + 1)
      throw input_error(fmt::format("{}: field {} has {} offsets for {} rows "
                                    "(expected {})",
                                    what, f, fld.offsets.size(), rows,
                                    rows + 1));
    if (fld.offsets.front() != 0)
      throw input_error(fmt::format("{}: field {} offsets start at {}, not 0",
                                    what, f, fld.offsets.front()));
    for (uint64_t r = 0; r < rows; ++r)
      if (fld.offsets[r + 1] < fld.offsets[r])
        throw input_error(fmt::format("{}: field {} offsets decrease at row "
                                      "{} ({} after {})",
                                      what, f, r, fld.offsets[r + 1],
                                      fld.offsets[r]));
    if (fld.offsets.back() != fld.keys.size())
      throw input_error(fmt::format("{}: field {} offsets end at {} but it "
                                    "has {} keys",
                                    what, f, fld.offsets.back(),
                                    fld.keys.size()));
    if (!fld.values.empty() && fld.values.size() != fld.keys.size())
      throw input_error(fmt::format("{}: field {} has {} values for {} keys",
                                    what, f, fld.values.size(),
                                    fld.keys.size()));
  }
}

} // namespace actorps
