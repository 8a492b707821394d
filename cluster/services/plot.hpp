#pragma once

// `--plot FILE.png`: loss and accuracy (or AUC) curves per epoch, drawn by
// gnuplot (Debian's gnuplot-nox, installed by scripts/setup.sh) at the end of
// training.

#include <string>
#include <vector>

#include "cluster/services/fit.hpp"

namespace actorps {

/// Checks, before training starts, that a plot can be written to `path`:
/// gnuplot is on PATH and PATH.tmp can be created (then removed).
/// @throws input_error "--plot: gnuplot not found on PATH; install Debian's
///         gnuplot-nox (scripts/setup.sh)" or "--plot: cannot write
///         PATH.tmp: REASON".
void check_plot(const std::string& path);

/// Draws `epochs` as a PNG of 1000 x 420 pixels into `path`: on the left the
/// training and test loss per epoch (nats per example), on the right every
/// other test metric (test_accuracy, test_auc, ... in [0, 1] for the
/// built-in models). gnuplot writes PATH.tmp, which is renamed to `path` on
/// success only; gnuplot's own messages go to stderr.
/// @throws input_error as check_plot; runtime_failure if there is no epoch
///         or gnuplot fails (naming its exit status).
void write_plot(const std::string& path,
                const std::vector<epoch_metrics>& epochs,
                const std::string& title);

/// Writes the plot of the epochs fit ran (st.history) when training ends.
/// Checks the plot tool and path when constructed, so that a missing gnuplot
/// is an error before training, not after it.
class plot_callback : public fit_callback {
public:
  /// @throws input_error as check_plot.
  plot_callback(std::string path, std::string title);

  void on_train_end(fit_state& st) override;

private:
  std::string path_;
  std::string title_;
};

} // namespace actorps
