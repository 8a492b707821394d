#pragma once

// Cuts the bytes of a child's output into lines as they arrive, for
// run_children (cluster/launch/launcher.cpp).

#include <cstddef>
#include <string>
#include <string_view>

namespace actorps::detail {

/// Holds the start of a line until its newline comes. A line longer than
/// `max_line` bytes is given in pieces of `max_line` bytes, cut at
/// multiples of `max_line` from its start however its bytes arrive, so
/// that a child writing without newlines is not buffered without bound.
class line_splitter {
public:
  explicit line_splitter(size_t max_line) : max_line_(max_line) {
    // nop
  }

  /// Takes `bytes` and calls `emit(line)` (without the newline) for every
  /// line or piece complete now.
  template <class F>
  void feed(std::string_view bytes, F&& emit) {
    pending_.append(bytes.data(), bytes.size());
    std::string_view rest{pending_};
    for (auto nl = rest.find('\n'); nl != std::string_view::npos;
         nl = rest.find('\n')) {
      auto line = rest.substr(0, nl);
      while (line.size() > max_line_) {
        emit(line.substr(0, max_line_));
        line.remove_prefix(max_line_);
      }
      emit(line);
      rest.remove_prefix(nl + 1);
    }
    while (rest.size() > max_line_) {
      emit(rest.substr(0, max_line_));
      rest.remove_prefix(max_line_);
    }
    pending_.erase(0, pending_.size() - rest.size());
  }

  /// At the end of the stream: `emit`s the last line if it had no newline,
  /// and starts over empty.
  template <class F>
  void finish(F&& emit) {
    if (!pending_.empty())
      emit(std::string_view{pending_});
    pending_.clear();
  }

private:
  size_t max_line_;
  std::string pending_;
};

} // namespace actorps::detail
