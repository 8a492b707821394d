#pragma once

#include <string>
#include <vector>

namespace actorps {

/// `actorps export --checkpoint DIR --out MODEL_DIR [--table-limit-bytes N]
/// [--name NAME]` plus the job flags of `actorps train` (--config FILE and
/// the rest) that describe the model and the data the checkpoint was
/// trained with: writes MODEL_DIR/STEP (models/export/exporter.hpp) and
/// one line about it on stdout. Returns the exit status (0).
/// @throws input_error for a bad flag, a config that does not describe
///         the checkpoint's model, or a corrupt checkpoint (exit 2).
int run_export(const std::vector<std::string>& args);

} // namespace actorps
