#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dataset.hpp"
#include "core/options.hpp"

namespace actorps {

class data_provider;
struct job_config;

/// Settings of the synthetic click log (the `data` section's fields of the
/// `synthetic_ctr` dataset).
struct synthetic_ctr_config {
  /// Dense features per example (Criteo: 13 integer counts, I1..I13).
  uint64_t dense_features = 13;
  /// Vocabulary of each categorical field (Criteo: 26 fields, C1..C26); keys
  /// of field f are in [0, cardinalities[f]).
  std::vector<uint64_t> cardinalities = default_cardinalities();
  /// Exponent s of the Zipf law of each field's keys: key k (0-based) has
  /// probability proportional to 1 / (k + 1)^s, so key 0 is the hottest.
  double zipf = 1.05;
  /// Training examples per epoch over all workers together.
  uint64_t rows_per_epoch = 1'000'000;
  /// Examples of the test split.
  uint64_t test_rows = 20'000;
  /// Seed of everything: the hidden model, the test split, the training
  /// stream (together with the shuffle seed).
  uint64_t seed = 1;

  /// 26 fields, largest 10,000,000: the ladder 10^7, 5*10^6, 10^6, ..., 50,
  /// 10 (13 values) twice.
  static std::vector<uint64_t> default_cardinalities();
};

/// Reads a synthetic_ctr_config from the data section's fields:
/// dense_features [0, 1024], cardinalities (1 to 1024 values, each in
/// [1, 2^40]), zipf [0, 10], rows_per_epoch [1, 2^40], test_rows [1, 2^26],
/// seed. Leaves unknown fields to the caller's finish().
/// @throws input_error "data.FIELD: ..." for a wrong type or range.
synthetic_ctr_config read_synthetic_ctr_config(option_reader& opts);

/// Opens the dataset "synthetic_ctr" (core/data_registry.hpp): the data
/// section's fields as read_synthetic_ctr_config reads them; training
/// batches are generated on the fly (rows_per_epoch, cut to
/// data.train_limit), the test split (test_rows, cut to data.test_limit) in
/// memory on first use.
/// @throws input_error "data.FIELD: ..." for a wrong or unknown field.
std::unique_ptr<data_provider> open_synthetic_ctr(const job_config& cfg);

/// Draws from a Zipf distribution over {1, ..., n}: P(k) = k^-s / H(n, s),
/// in O(1) time and memory per draw for any n (up to 2^53) and any s > 0.
///
/// Rejection-inversion after W. Hörmann and G. Derflinger, "Rejection-
/// inversion to generate variates from monotone discrete distributions",
/// ACM TOMACS 6(3):169-184, 1996, in the form of Apache Commons RNG's
/// RejectionInversionZipfSampler (which extends it to s <= 1 by using
/// H(x) = ((x)^(1-s) - 1) / (1 - s)). The expected number of uniforms per
/// draw is below 1.1.
class zipf_sampler {
public:
  /// @pre n >= 1, s >= 0.
  zipf_sampler(uint64_t n, double s);

  /// One draw in [1, n]; `uniform` returns doubles in [0, 1).
  template <class Uniform>
  uint64_t operator()(Uniform& uniform) const {
    for (;;) {
      double u = h_integral_n_ + uniform() * (h_integral_x1_ - h_integral_n_);
      double x = h_integral_inverse(u);
      double kd = x + 0.5;
      uint64_t k = kd < 1.0 ? 1 : static_cast<uint64_t>(kd);
      if (k > n_)
        k = n_;
      auto kf = static_cast<double>(k);
      if (kf - x <= s_ || u >= h_integral(kf + 0.5) - h(kf))
        return k;
    }
  }

private:
  double h(double x) const;
  double h_integral(double x) const;
  double h_integral_inverse(double x) const;

  uint64_t n_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

/// A deterministic synthetic click log with Criteo's schema (dense count
/// features and categorical fields, a binary click label), generated on the
/// fly as DLRM's synthetic data mode does (Naumov et al., "Deep Learning
/// Recommendation Model for Personalization and Recommendation Systems",
/// 2019), but with Zipf-distributed keys and learnable labels.
///
/// Example: a counter-based generator (splitmix64, Steele et al., "Fast
/// splittable pseudorandom number generators", OOPSLA 2014) is seeded with
/// a hash of the example's coordinates, so every example is a pure function
/// of them (no state, any example can be generated alone):
/// - dense feature j: log(1 + x) of a log-normal count x = exp(m_j + s_j z),
///   z ~ N(0, 1), m_j in [-1, 3), s_j in [0.5, 1.5) drawn from the seed (the
///   log(x + 1) transform is DLRM's preprocessing of Criteo's counts);
///   values lie mostly in [0, 8].
/// - field f: one key, rank - 1 of a Zipf(cardinalities[f], zipf) draw.
/// - label: 1 with probability sigmoid(t), t the true logit of a hidden
///   logistic model: t = b + sum_f w_f(key_f) + sum_j v_j (d_j - c_j), where
///   w_f(k) = 0.22 g(hash(seed, f, k)) and v_j = 0.2 g(hash(seed, j)), g an
///   approximately standard normal (Irwin-Hall of 4 uniforms) from a hash:
///   no table is stored. c_j and the bias b are calibrated at construction
///   on 4,096 examples of a separate stream so that the click rate is about
///   25%. With the defaults the Bayes-optimal AUC (scoring by t) is about
///   0.79 (0.77 to 0.80 over seeds 1..6; measured on 200,000 test examples),
///   and most of it is in the hot keys and the dense features, so that a
///   model learns it visibly.
///
/// How the keys of a stream of click-log parts move over time
/// (core/stream_gen.hpp); see synthetic_ctr::append_stream.
struct key_drift {
  /// Added to every Zipf-drawn key of the part: its hot keys are
  /// [shift, shift + a few), so the head of each field moves with `shift`.
  /// At most new_key_base - cardinality of the largest field.
  uint64_t shift = 0;
  /// Probability in [0, 1] that a field's key is a new one instead, never
  /// drawn before (see new_key_base).
  double new_id_rate = 0;
};

/// Immutable after construction; thread-safe.
class synthetic_ctr {
public:
  /// @throws input_error if the config is unusable (no fields).
  explicit synthetic_ctr(synthetic_ctr_config cfg);

  const synthetic_ctr_config& config() const noexcept {
    return cfg_;
  }

  /// Dense features, then fields "C1".."Cn" (fixed vocabularies, one key
  /// per example, unweighted), binary labels.
  const data_schema& schema() const noexcept {
    return schema_;
  }

  /// The example of training worker `worker` (under shuffle seed
  /// `shuffle_seed`) at `offset` of epoch `epoch`, appended to `out`
  /// (reset for schema()); returns its true logit.
  double append_train(example_batch& out, uint64_t shuffle_seed,
                      uint64_t worker, uint64_t epoch, uint64_t offset) const;

  /// Test example `index`, from a stream of its own; returns its true logit.
  double append_test(example_batch& out, uint64_t index) const;

  /// Keys at or above this are new keys (key_drift::new_id_rate): 2^62 plus
  /// 62 bits of a hash of (seed, part, row, field), so two of them are the
  /// same key with probability 2^-62 per pair, and never a Zipf-drawn key
  /// (those are below 2^62).
  static constexpr uint64_t new_key_base = uint64_t{1} << 62;

  /// Example `row` of part `part` of a stream, appended to `out` (reset for
  /// schema()); returns its true logit. As the training examples, with
  /// drifting keys: field f's key is, with probability drift.new_id_rate, a
  /// new key (>= new_key_base), else the Zipf-drawn key + drift.shift. The
  /// label comes from the same hidden model as always (w_f of the key as
  /// drawn), so a key means the same whenever it appears, whatever the
  /// part; keys are no longer below the field's cardinality (a stream's
  /// schema has unbounded fields).
  /// @pre drift.shift + the largest cardinality <= new_key_base.
  double append_stream(example_batch& out, uint64_t part, uint64_t row,
                       const key_drift& drift) const;

  /// The first `rows` test examples (config().test_rows by default), and
  /// their true logits in `logits` if not null.
  dataset make_test_set(uint64_t rows,
                        std::vector<double>* logits = nullptr) const;

private:
  double append(example_batch& out, uint64_t key,
                const key_drift* drift = nullptr) const;

  synthetic_ctr_config cfg_;
  data_schema schema_;
  std::vector<zipf_sampler> samplers_;
  std::vector<double> dense_mean_;  // m_j
  std::vector<double> dense_scale_; // s_j
  std::vector<double> dense_weight_; // v_j
  std::vector<double> dense_center_; // c_j
  uint64_t weight_hash_ = 0;         // hash of (seed, field-weight domain)
  double bias_ = 0;
};

/// A worker's endless stream of synthetic_ctr training batches. Worker w of
/// n reads rows_per_epoch / n examples per epoch (one more for
/// w < rows_per_epoch % n, as shard_indices splits rows); the example at
/// offset i of epoch e is append_train(shuffle_seed, w, e, i), so seek() is
/// O(1) and every run is the same. Batches run across epoch boundaries as
/// batch_iterator's do. next() allocates nothing once `out` has grown.
/// Not thread-safe: one source per worker.
class synthetic_ctr_source final : public batch_source {
public:
  /// @throws input_error "data.batch_size: ..." if batch_size is 0 or larger
  ///         than the worker's rows per epoch.
  synthetic_ctr_source(std::shared_ptr<const synthetic_ctr> gen,
                       input_context ctx, uint64_t batch_size,
                       uint64_t shuffle_seed);

  void next(example_batch& out) override;
  void seek(data_position pos) override;

  data_position position() const override {
    return pos_;
  }

  uint64_t batch_size() const override {
    return batch_size_;
  }

  uint64_t shard_rows() const override {
    return shard_rows_;
  }

  const data_schema& schema() const override {
    return gen_->schema();
  }

private:
  std::shared_ptr<const synthetic_ctr> gen_;
  input_context ctx_;
  uint64_t batch_size_;
  uint64_t shuffle_seed_;
  uint64_t shard_rows_;
  data_position pos_;
};

} // namespace actorps
