#include "core/memory_provider.hpp"

#include "core/dataset_ranges.hpp"

#include <utility>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

bool same_schema(const data_schema& a, const data_schema& b) {
  if (a.dense_dim != b.dense_dim || a.labels != b.labels
      || a.classes != b.classes || a.fields.size() != b.fields.size())
    return false;
  for (size_t f = 0; f < a.fields.size(); ++f)
    if (a.fields[f].name != b.fields[f].name
        || a.fields[f].vocabulary != b.fields[f].vocabulary
        || a.fields[f].weighted != b.fields[f].weighted)
      return false;
  return true;
}

std::string to_string(const data_schema& s) {
  std::string fields;
  for (auto& f : s.fields)
    fields += fmt::format(" {}[{}{}]", f.name, f.vocabulary,
                          f.weighted ? ", weighted" : "");
  return fmt::format("{} dense,{} {} labels ({} classes)", s.dense_dim,
                     fields.empty() ? " no fields," : fields + ",",
                     s.labels == label_kind::binary ? "binary" : "multiclass",
                     s.classes);
}

} // namespace

memory_provider::memory_provider(std::string description, loader train,
                                 loader test, std::optional<data_schema> known,
                                 shard_loader shards)
  : description_(std::move(description)),
    load_train_(std::move(train)),
    load_test_(std::move(test)),
    load_shards_(std::move(shards)),
    schema_(std::move(known)) {
  // nop
}

const data_schema& memory_provider::schema() {
  if (!schema_)
    schema_ = train()->schema;
  return *schema_;
}

uint64_t memory_provider::train_rows() {
  if (!load_shards_)
    return train()->rows();
  if (!train_rows_)
    train_rows_ = load_shards_(1, {}).split_rows;
  counted_ = true;
  return *train_rows_;
}

std::shared_ptr<batch_source>
memory_provider::train_source(const input_context& ctx, uint64_t batch_size,
                              uint64_t seed) {
  if (!load_shards_ || ctx.num_input_pipelines == 0
      || ctx.input_pipeline_id >= ctx.num_input_pipelines)
    return std::make_shared<batch_iterator>(train(), ctx, batch_size, seed);
  return std::make_shared<batch_iterator>(shard(ctx), batch_size, seed);
}

std::shared_ptr<const dataset> memory_provider::test_set() {
  if (!test_)
    test_ = checked(load_test_(), "test");
  return test_;
}

std::shared_ptr<range_reader> memory_provider::train_ranges(uint64_t seed) {
  return std::make_shared<dataset_ranges>(train(), seed);
}

std::string memory_provider::describe() const {
  return description_;
}

const std::shared_ptr<const dataset>& memory_provider::train() {
  if (!train_)
    train_ = checked(load_train_(), "training");
  return train_;
}

const dataset_shard& memory_provider::shard(const input_context& ctx) {
  auto key = std::make_pair(ctx.num_input_pipelines, ctx.input_pipeline_id);
  if (auto i = shards_.find(key); i != shards_.end())
    return i->second;
  std::vector<uint32_t> ids{ctx.input_pipeline_id};
  bool alone = !counted_;
  for (auto& [k, loaded] : shards_)
    alone = alone && k.first != ctx.num_input_pipelines;
  if (!alone) {
    ids.clear();
    for (uint32_t id = 0; id < ctx.num_input_pipelines; ++id)
      if (shards_.count({ctx.num_input_pipelines, id}) == 0)
        ids.push_back(id);
  }
  auto loaded = load_shards_(ctx.num_input_pipelines, ids);
  train_rows_ = loaded.split_rows;
  if (loaded.split_rows == 0)
    throw input_error(fmt::format("{}: the training split has no examples",
                                  description_));
  for (auto& sh : loaded.shards) {
    if (schema_ && !same_schema(*schema_, sh.rows->schema))
      throw input_error(fmt::format("{}: the training split holds {}, "
                                    "expected {}",
                                    description_,
                                    to_string(sh.rows->schema),
                                    to_string(*schema_)));
    shards_.emplace(std::make_pair(sh.ctx.num_input_pipelines,
                                   sh.ctx.input_pipeline_id),
                    std::move(sh));
  }
  return shards_.at(key);
}

std::shared_ptr<const dataset> memory_provider::checked(dataset ds,
                                                        const char* split) {
  if (ds.rows() == 0)
    throw input_error(fmt::format("{}: the {} split has no examples",
                                  description_, split));
  if (schema_ && !same_schema(*schema_, ds.schema))
    throw input_error(fmt::format("{}: the {} split holds {}, expected {}",
                                  description_, split,
                                  to_string(ds.schema),
                                  to_string(*schema_)));
  if (!schema_)
    schema_ = ds.schema;
  return std::make_shared<const dataset>(std::move(ds));
}

} // namespace actorps
