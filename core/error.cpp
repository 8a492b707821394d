#include "core/error.hpp"

#include <fstream>

#include <fmt/format.h>

namespace actorps {

std::string read_text_file(const std::string& path, const std::string& what) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    throw input_error(fmt::format("{}: cannot open {}", path, what));
  // Sized from the file at once (a stringstream grew it by doubling and
  // copied it once more at the end: a third of the time of reading a
  // 26 MB stream part); then whatever is left, for files whose size says
  // nothing (/proc) or that grew meanwhile.
  std::string text;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size > 0) {
    text.resize(static_cast<size_t>(size));
    in.read(text.data(), size);
    text.resize(static_cast<size_t>(in.gcount()));
  }
  char buf[1 << 16];
  while (in.good()) {
    in.read(buf, sizeof buf);
    text.append(buf, static_cast<size_t>(in.gcount()));
  }
  if (in.bad())
    throw input_error(fmt::format("{}: cannot read {}", path, what));
  return text;
}

std::string quoted(std::string_view token) {
  if (token.size() > 40)
    return fmt::format("\"{}...\"", token.substr(0, 40));
  return fmt::format("\"{}\"", token);
}

} // namespace actorps
