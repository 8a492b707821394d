#pragma once

#include <string>
#include <vector>

namespace actorps {

/// `actorps serve MODEL_DIR [--port P] [--host H] [flags]`: answers
/// TensorFlow Serving's REST API with the newest version of the export in
/// MODEL_DIR, switching to newer versions as they land
/// (cluster/serve/prediction_server.hpp, docs/guide/serving.md). Prints
/// "serving NAME version V on URL" on stdout once it listens; runs until
/// SIGINT or SIGTERM, then answers what it was asked and returns 0.
/// @throws input_error for a bad flag, a MODEL_DIR with no loadable
///         version, a port it cannot listen on, unusable TLS files.
int run_serve(const std::vector<std::string>& args);

} // namespace actorps
