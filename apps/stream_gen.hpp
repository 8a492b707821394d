#pragma once

#include <string>
#include <vector>

namespace actorps {

/// `actorps stream-gen --out DIR --parts N --rows-per-part R
/// [--new-id-rate X] [--drift S] [--seed K] [--interval-ms T]`: writes a
/// stream of click-log parts with drifting ids (core/stream_gen.hpp), one
/// line per part and a summary on stdout. SIGINT or SIGTERM stops it
/// between parts (the parts written are complete). Returns the exit status.
/// @throws input_error for a bad flag, or as generate_stream.
int run_stream_gen(const std::vector<std::string>& args);

} // namespace actorps
