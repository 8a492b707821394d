#include "core/error.hpp"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace actorps {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in{path};
  if (!in)
    throw input_error(fmt::format("{}: cannot open {}", path, what));
  std::stringstream buf;
  buf << in.rdbuf();
  if (in.bad())
    throw input_error(fmt::format("{}: cannot read {}", path, what));
  return buf.str();
}

std::string quoted(std::string_view token) {
  if (token.size() > 40)
    return fmt::format("\"{}...\"", token.substr(0, 40));
  return fmt::format("\"{}\"", token);
}

} // namespace actorps
