#pragma once

#include <cstdint>

#include "core/metrics.hpp"

namespace actorps {

/// Binary cross-entropy of `rows` logits (z[r * stride]) against 0/1
/// `labels`: returns the summed loss (nats) and writes d(mean loss)/d z_r =
/// (sigmoid(z_r) - y_r) / rows into dz[r * stride] (dz may alias z).
double binary_loss_and_delta(const float* z, uint64_t stride,
                             const int32_t* labels, uint64_t rows, float* dz);

/// Adds `rows` logits (z[r * stride]) with their labels to `acc`: log loss,
/// accuracy at probability 0.5 (logit 0), and the logit as the score for
/// AUC.
void add_binary_predictions(const float* z, uint64_t stride,
                            const int32_t* labels, uint64_t rows,
                            eval_accumulator& acc);

/// Writes the probability of label 1, sigmoid(z[r * stride]) as float, of
/// `rows` logits into out[r] (model::predict of a binary model).
void binary_probabilities(const float* z, uint64_t stride, uint64_t rows,
                          float* out);

} // namespace actorps
