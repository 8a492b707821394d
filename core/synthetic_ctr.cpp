#include "core/synthetic_ctr.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "core/data_registry.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"

namespace actorps {

namespace {

// -- counter-based randomness -------------------------------------------------

constexpr uint64_t golden = 0x9e3779b97f4a7c15ull;

/// splitmix64's output function (Steele, Lea & Flood 2014; the constants of
/// Vigna's reference implementation).
constexpr uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Hash of a tuple, one element at a time.
constexpr uint64_t combine(uint64_t h, uint64_t x) {
  return mix(h ^ mix(x + golden));
}

/// splitmix64 started from a key: the stream of one example.
struct splitmix {
  uint64_t state;

  uint64_t next() {
    return mix(state += golden);
  }

  /// Uniform in [0, 1), 53 bits.
  double operator()() {
    return static_cast<double>(next() >> 11) * 0x1.0p-53;
  }
};

/// An approximately standard normal number from a hash: Irwin-Hall of four
/// 16-bit uniforms, scaled to unit variance (support +-3.46).
double hashed_normal(uint64_t h) {
  double sum = 0;
  for (int i = 0; i < 4; ++i)
    sum += (static_cast<double>((h >> (16 * i)) & 0xffff) + 0.5) / 65536.0;
  return (sum - 2.0) * 1.7320508075688772;
}

/// The logistic function as the generator has always computed it (not
/// metrics.hpp's sigmoid, whose bits differ for t < 0, and whose name this
/// one shadowed when a unity build put both files in one batch).
double ctr_sigmoid(double t) {
  return 1.0 / (1.0 + std::exp(-t));
}

// Stream ids: which sequence of examples a key belongs to.
constexpr uint64_t train_stream = 0;
constexpr uint64_t test_stream = 1;
constexpr uint64_t calibration_stream = 2;
constexpr uint64_t part_stream = 5;
// Hash domains of the hidden model's parameters.
constexpr uint64_t field_weight_domain = 3;
constexpr uint64_t dense_domain = 4;

/// Scales of the hidden model: the standard deviation of a key's weight and
/// of a dense feature's weight. Chosen so that the defaults give a Bayes AUC
/// near 0.79 (logit sd 1.2; 0.45 and 0.4 gave 0.90, too easy to be a
/// realistic click log; measured in test/core/synthetic_ctr_test.cpp).
constexpr double field_weight_scale = 0.22;
constexpr double dense_weight_scale = 0.2;
/// The click rate the bias is calibrated to.
constexpr double target_click_rate = 0.25;
constexpr uint64_t calibration_rows = 4096;

} // namespace

// -- configuration ------------------------------------------------------------

std::vector<uint64_t> synthetic_ctr_config::default_cardinalities() {
  const std::vector<uint64_t> ladder{10'000'000, 5'000'000, 1'000'000,
                                     500'000,    100'000,   50'000,
                                     10'000,     5'000,     1'000,
                                     500,        100,       50,
                                     10};
  std::vector<uint64_t> result = ladder;
  result.insert(result.end(), ladder.begin(), ladder.end());
  return result;
}

synthetic_ctr_config read_synthetic_ctr_config(option_reader& opts) {
  synthetic_ctr_config cfg;
  cfg.dense_features = opts.get_uint("dense_features", cfg.dense_features, 0,
                                     1024);
  cfg.cardinalities = opts.get_uints("cardinalities", cfg.cardinalities, 1,
                                     uint64_t{1} << 40);
  if (cfg.cardinalities.empty() || cfg.cardinalities.size() > 1024)
    throw input_error(fmt::format("data.cardinalities: needs 1 to 1024 "
                                  "fields, got {}",
                                  cfg.cardinalities.size()));
  cfg.zipf = opts.get_real("zipf", cfg.zipf, 0.0, 10.0);
  cfg.rows_per_epoch = opts.get_uint("rows_per_epoch", cfg.rows_per_epoch, 1,
                                     uint64_t{1} << 40);
  cfg.test_rows = opts.get_uint("test_rows", cfg.test_rows, 1,
                                uint64_t{1} << 26);
  cfg.seed = opts.get_uint("seed", cfg.seed, 0, UINT64_MAX);
  return cfg;
}

// -- zipf_sampler ---------------------------------------------------------------

namespace {

/// log(1 + x) / x, continuous at 0.
double helper1(double x) {
  if (std::abs(x) > 1e-8)
    return std::log1p(x) / x;
  return 1.0 - x * (0.5 - x * (1.0 / 3.0 - x * 0.25));
}

/// (exp(x) - 1) / x, continuous at 0.
double helper2(double x) {
  if (std::abs(x) > 1e-8)
    return std::expm1(x) / x;
  return 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + x * 0.25));
}

} // namespace

zipf_sampler::zipf_sampler(uint64_t n, double s) : n_(n), exponent_(s) {
  h_integral_x1_ = h_integral(1.5) - 1.0;
  h_integral_n_ = h_integral(static_cast<double>(n) + 0.5);
  s_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
}

double zipf_sampler::h(double x) const {
  return std::exp(-exponent_ * std::log(x));
}

double zipf_sampler::h_integral(double x) const {
  // H(x) = (x^(1-s) - 1) / (1 - s), which tends to log(x) as s -> 1.
  double log_x = std::log(x);
  return helper2((1.0 - exponent_) * log_x) * log_x;
}

double zipf_sampler::h_integral_inverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0)
    t = -1.0; // rounding errors only
  return std::exp(helper1(t) * x);
}

// -- synthetic_ctr ----------------------------------------------------------------

synthetic_ctr::synthetic_ctr(synthetic_ctr_config cfg) : cfg_(std::move(cfg)) {
  if (cfg_.cardinalities.empty())
    throw input_error("data.cardinalities: needs at least one field");
  schema_.dense_dim = cfg_.dense_features;
  for (size_t f = 0; f < cfg_.cardinalities.size(); ++f) {
    schema_.fields.push_back(
      field_schema{fmt::format("C{}", f + 1), cfg_.cardinalities[f], false});
    samplers_.emplace_back(cfg_.cardinalities[f], cfg_.zipf);
  }
  schema_.labels = label_kind::binary;
  schema_.classes = 2;
  weight_hash_ = combine(mix(cfg_.seed), field_weight_domain);
  const auto seed_hash = combine(mix(cfg_.seed), dense_domain);
  for (uint64_t j = 0; j < cfg_.dense_features; ++j) {
    splitmix rng{combine(seed_hash, j)};
    dense_mean_.push_back(-1.0 + 4.0 * rng());
    dense_scale_.push_back(0.5 + rng());
    dense_weight_.push_back(dense_weight_scale * hashed_normal(rng.next()));
  }
  // Calibration: centre the dense features and find the bias that gives the
  // target click rate, on a stream of its own.
  dense_center_.assign(cfg_.dense_features, 0.0);
  bias_ = 0;
  example_batch scratch;
  scratch.reset(schema_.dense_dim, schema_.fields.size());
  std::vector<double> raw(calibration_rows);
  const auto calibration_key = combine(mix(cfg_.seed), calibration_stream);
  for (uint64_t i = 0; i < calibration_rows; ++i)
    raw[i] = append(scratch, combine(calibration_key, i));
  double shift = 0;
  for (uint64_t j = 0; j < cfg_.dense_features; ++j) {
    double sum = 0;
    for (uint64_t i = 0; i < calibration_rows; ++i)
      sum += scratch.dense[i * cfg_.dense_features + j];
    dense_center_[j] = sum / static_cast<double>(calibration_rows);
    shift += dense_weight_[j] * dense_center_[j];
  }
  // The mean click probability grows with the bias: bisect.
  double lo = -30, hi = 30;
  for (int it = 0; it < 100; ++it) {
    double mid = 0.5 * (lo + hi);
    double rate = 0;
    for (auto t : raw)
      rate += ctr_sigmoid(t - shift + mid);
    rate /= static_cast<double>(calibration_rows);
    (rate < target_click_rate ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

double synthetic_ctr::append(example_batch& out, uint64_t key,
                             const key_drift* drift) const {
  splitmix rng{key};
  double logit = bias_;
  // Dense features: log(1 + x), x log-normal; normals by Box-Muller, two at
  // a time.
  const auto dim = cfg_.dense_features;
  double spare = 0;
  for (uint64_t j = 0; j < dim; ++j) {
    double z;
    if (j % 2 == 0) {
      double r = std::sqrt(-2.0 * std::log(1.0 - rng()));
      double phi = 6.283185307179586 * rng();
      z = r * std::cos(phi);
      spare = r * std::sin(phi);
    } else {
      z = spare;
    }
    double t = dense_mean_[j] + dense_scale_[j] * z;
    // log(1 + exp(t)), without overflow.
    double d = t > 30 ? t : std::log1p(std::exp(t));
    out.dense.push_back(static_cast<float>(d));
    logit += dense_weight_[j] * (static_cast<double>(static_cast<float>(d))
                                 - dense_center_[j]);
  }
  for (size_t f = 0; f < samplers_.size(); ++f) {
    uint64_t k = samplers_[f](rng) - 1;
    if (drift != nullptr) {
      // One more draw per field, so a drifting stream of examples is a
      // stream of its own (append_stream's keys differ from append_train's).
      auto u = rng.next();
      if (static_cast<double>(u >> 11) * 0x1.0p-53 < drift->new_id_rate)
        k = new_key_base | (combine(u, f) >> 2);
      else
        k += drift->shift;
    }
    auto& fld = out.fields[f];
    fld.keys.push_back(k);
    fld.offsets.push_back(fld.keys.size());
    logit += field_weight_scale
             * hashed_normal(combine(combine(weight_hash_, f), k));
  }
  out.labels.push_back(rng() < ctr_sigmoid(logit) ? 1 : 0);
  ++out.rows;
  return logit;
}

double synthetic_ctr::append_train(example_batch& out, uint64_t shuffle_seed,
                                   uint64_t worker, uint64_t epoch,
                                   uint64_t offset) const {
  auto key = combine(mix(cfg_.seed), train_stream);
  key = combine(key, shuffle_seed);
  key = combine(key, worker);
  key = combine(key, epoch);
  return append(out, combine(key, offset));
}

double synthetic_ctr::append_stream(example_batch& out, uint64_t part,
                                    uint64_t row,
                                    const key_drift& drift) const {
  auto key = combine(combine(mix(cfg_.seed), part_stream), part);
  return append(out, combine(key, row), &drift);
}

double synthetic_ctr::append_test(example_batch& out, uint64_t index) const {
  return append(out, combine(combine(mix(cfg_.seed), test_stream), index));
}

dataset synthetic_ctr::make_test_set(uint64_t rows,
                                     std::vector<double>* logits) const {
  dataset result;
  result.schema = schema_;
  result.examples.reset(schema_.dense_dim, schema_.fields.size());
  result.examples.dense.reserve(rows * schema_.dense_dim);
  for (auto& f : result.examples.fields) {
    f.keys.reserve(rows);
    f.offsets.reserve(rows + 1);
  }
  result.examples.labels.reserve(rows);
  if (logits != nullptr)
    logits->clear();
  for (uint64_t i = 0; i < rows; ++i) {
    auto t = append_test(result.examples, i);
    if (logits != nullptr)
      logits->push_back(t);
  }
  return result;
}

// -- synthetic_ctr_source -----------------------------------------------------------

synthetic_ctr_source::synthetic_ctr_source(
  std::shared_ptr<const synthetic_ctr> gen, input_context ctx,
  uint64_t batch_size, uint64_t shuffle_seed)
  : gen_(std::move(gen)),
    ctx_(ctx),
    batch_size_(batch_size),
    shuffle_seed_(shuffle_seed),
    shard_rows_(0) {
  const auto rows = gen_->config().rows_per_epoch;
  const auto n = ctx.num_input_pipelines;
  if (n > 0 && ctx.input_pipeline_id < n)
    shard_rows_ = rows / n + (ctx.input_pipeline_id < rows % n ? 1 : 0);
  if (batch_size_ == 0)
    throw input_error("data.batch_size: must be at least 1");
  if (batch_size_ > shard_rows_)
    throw input_error(fmt::format("data.batch_size: {} is larger than the "
                                  "shard of worker {} ({} rows of {} over {} "
                                  "workers)",
                                  batch_size_, ctx.input_pipeline_id,
                                  shard_rows_, rows, n));
}

void synthetic_ctr_source::next(example_batch& out) {
  const auto& schema = gen_->schema();
  out.reset(schema.dense_dim, schema.fields.size());
  for (uint64_t i = 0; i < batch_size_; ++i) {
    if (pos_.offset == shard_rows_) {
      ++pos_.epoch;
      pos_.offset = 0;
    }
    gen_->append_train(out, shuffle_seed_, ctx_.input_pipeline_id, pos_.epoch,
                       pos_.offset++);
  }
}

void synthetic_ctr_source::seek(data_position pos) {
  if (pos.offset > shard_rows_)
    throw input_error(fmt::format("data position offset {} is past the shard "
                                  "size {}",
                                  pos.offset, shard_rows_));
  pos_ = pos;
}

// -- the dataset synthetic_ctr --------------------------------------------------

namespace {

/// Dynamic data shards of the synthetic click log: range r is the examples
/// at offsets [r.begin, r.end) of epoch r.part of one input pipeline (0),
/// generated on the fly as the static shards' are, so a worker holds no
/// rows (the examples are independent draws: no order to shuffle).
class synthetic_ctr_ranges final : public range_reader {
public:
  synthetic_ctr_ranges(std::shared_ptr<const synthetic_ctr> gen, uint64_t seed)
    : gen_(std::move(gen)), seed_(seed) {
    // nop
  }

  void read(const data_range& r, example_batch& out) override {
    auto rows = gen_->config().rows_per_epoch;
    if (r.end > rows || r.begin > r.end)
      throw input_error(fmt::format("data range {}-{} of epoch {}: an epoch "
                                    "of synthetic_ctr has {} rows",
                                    r.begin, r.end, r.part, rows));
    const auto& schema = gen_->schema();
    out.reset(schema.dense_dim, schema.fields.size());
    for (auto i = r.begin; i < r.end; ++i)
      gen_->append_train(out, seed_, 0, r.part, i);
  }

private:
  std::shared_ptr<const synthetic_ctr> gen_;
  uint64_t seed_;
};

/// The synthetic click log: training batches generated on the fly.
class synthetic_ctr_provider final : public data_provider {
public:
  synthetic_ctr_provider(synthetic_ctr_config cfg, uint64_t test_limit)
    : cfg_(std::move(cfg)), test_limit_(test_limit) {
    // nop
  }

  const data_schema& schema() override {
    return gen()->schema();
  }

  uint64_t train_rows() override {
    return cfg_.rows_per_epoch;
  }

  std::shared_ptr<batch_source> train_source(const input_context& ctx,
                                             uint64_t batch_size,
                                             uint64_t seed) override {
    return std::make_shared<synthetic_ctr_source>(gen(), ctx, batch_size,
                                                  seed);
  }

  std::shared_ptr<const dataset> test_set() override {
    if (!test_) {
      auto rows = cfg_.test_rows;
      if (test_limit_ != 0)
        rows = std::min(rows, test_limit_);
      test_ = std::make_shared<const dataset>(gen()->make_test_set(rows));
    }
    return test_;
  }

  std::shared_ptr<range_reader> train_ranges(uint64_t seed) override {
    return std::make_shared<synthetic_ctr_ranges>(gen(), seed);
  }

  std::string describe() const override {
    return fmt::format("synthetic_ctr (seed {}, {} dense features, {} "
                       "fields, {} rows per epoch, {} test rows)",
                       cfg_.seed, cfg_.dense_features,
                       cfg_.cardinalities.size(), cfg_.rows_per_epoch,
                       cfg_.test_rows);
  }

private:
  const std::shared_ptr<const synthetic_ctr>& gen() {
    if (!gen_)
      gen_ = std::make_shared<const synthetic_ctr>(cfg_);
    return gen_;
  }

  synthetic_ctr_config cfg_;
  uint64_t test_limit_;
  std::shared_ptr<const synthetic_ctr> gen_;
  std::shared_ptr<const dataset> test_;
};

} // namespace

std::unique_ptr<data_provider> open_synthetic_ctr(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "synthetic_ctr"};
  auto sc = read_synthetic_ctr_config(opts);
  opts.finish();
  if (cfg.train_limit != 0)
    sc.rows_per_epoch = std::min(sc.rows_per_epoch, cfg.train_limit);
  return std::make_unique<synthetic_ctr_provider>(std::move(sc),
                                                  cfg.test_limit);
}

} // namespace actorps
