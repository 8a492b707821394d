#include "cluster/spec/hostlist.hpp"

#include <cctype>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

namespace {

/// Numbers in a host list have at most this many digits (< 10^18 fits
/// uint64_t with room for the arithmetic below).
constexpr size_t max_digits = 18;

/// One range of a bracket group: lo..hi, each written with at least `width`
/// digits.
struct number_range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;
};

/// Text followed by a bracket group, e.g. "rack" and [1-2].
struct group {
  std::string prefix;
  std::vector<number_range> ranges;
  uint64_t size = 0; ///< names the group stands for
};

class hostlist_parser {
public:
  explicit hostlist_parser(std::string_view text) : text_(text) {
    // nop
  }

  std::vector<std::string> run() {
    bool any = false;
    size_t part_begin = 0;
    int depth = 0;
    for (size_t i = 0; i <= text_.size(); ++i) {
      if (i < text_.size()) {
        auto c = text_[i];
        if (c == '[')
          ++depth;
        else if (c == ']')
          --depth;
        if (c != ',' || depth > 0)
          continue;
      }
      // [part_begin, i) is one comma-separated part.
      auto part = text_.substr(part_begin, i - part_begin);
      if (part.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos) {
        if (text_.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos)
          fail("the list is empty", 0);
        fail("empty entry", i);
      }
      split_entries(part, part_begin);
      any = true;
      part_begin = i + 1;
    }
    if (!any)
      fail("the list is empty", 0);
    return std::move(names_);
  }

private:
  [[noreturn]] void fail(const std::string& what, size_t pos) const {
    throw input_error(fmt::format("bad Slurm host list \"{}\": {} (at "
                                  "character {})",
                                  text_, what, pos + 1));
  }

  static bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
  }

  /// Splits one comma-separated part at whitespace outside brackets.
  void split_entries(std::string_view part, size_t offset) {
    size_t i = 0;
    while (i < part.size()) {
      while (i < part.size() && is_space(part[i]))
        ++i;
      if (i == part.size())
        return;
      auto begin = i;
      int depth = 0;
      while (i < part.size() && (depth > 0 || !is_space(part[i]))) {
        if (part[i] == '[')
          ++depth;
        else if (part[i] == ']')
          --depth;
        ++i;
      }
      entry(part.substr(begin, i - begin), offset + begin);
    }
  }

  /// Expands one entry such as "rack[1-2]-n[01-04]".
  void entry(std::string_view s, size_t offset) {
    std::vector<group> groups;
    std::string pending;
    for (size_t j = 0; j < s.size(); ++j) {
      auto c = s[j];
      if (c == '[') {
        auto close = s.find(']', j + 1);
        auto open = s.find('[', j + 1);
        if (close == std::string_view::npos)
          fail("'[' without ']'", offset + j);
        if (open < close)
          fail("'[' inside brackets", offset + open);
        group g;
        g.prefix = std::move(pending);
        pending.clear();
        parse_ranges(s.substr(j + 1, close - j - 1), offset + j + 1, g);
        groups.push_back(std::move(g));
        j = close;
      } else if (c == ']') {
        fail("']' without '['", offset + j);
      } else if (std::iscntrl(static_cast<unsigned char>(c))) {
        fail("control character in a host name", offset + j);
      } else {
        pending += c;
      }
    }
    if (groups.empty()) {
      add_names(1);
      names_.push_back(std::move(pending));
      return;
    }
    if (!pending.empty())
      fail(fmt::format("text \"{}\" after the last ']' (Slurm allows none)",
                       pending),
           offset + s.size() - pending.size());
    uint64_t count = 1;
    for (auto& g : groups) {
      if (g.size > max_hostlist_size || count * g.size > max_hostlist_size)
        fail(fmt::format("expands to more than {} names", max_hostlist_size),
             offset);
      count *= g.size;
    }
    add_names(count);
    std::vector<std::string> partial{std::string{}};
    for (auto& g : groups) {
      std::vector<std::string> next;
      next.reserve(partial.size() * g.size);
      for (auto& head : partial)
        for (auto& r : g.ranges)
          for (auto n = r.lo;; ++n) {
            next.push_back(fmt::format("{}{}{:0{}}", head, g.prefix, n,
                                       r.width));
            if (n == r.hi)
              break;
          }
      partial = std::move(next);
    }
    for (auto& name : partial)
      names_.push_back(std::move(name));
  }

  /// Parses "1-3,07" (the inside of a bracket group) into `g`.
  void parse_ranges(std::string_view inside, size_t offset, group& g) {
    if (inside.empty())
      fail("empty brackets", offset);
    size_t begin = 0;
    for (;;) {
      auto comma = inside.find(',', begin);
      auto r = inside.substr(begin, comma == std::string_view::npos
                                      ? std::string_view::npos
                                      : comma - begin);
      if (r.empty())
        fail("empty range", offset + begin);
      auto dash = r.find('-');
      number_range range;
      auto lo = r.substr(0, dash);
      range.lo = number(lo, offset + begin);
      range.width = lo.size();
      if (dash == std::string_view::npos) {
        range.hi = range.lo;
      } else {
        auto hi = r.substr(dash + 1);
        if (hi.empty())
          fail(fmt::format("open range \"{}\"", r), offset + begin);
        range.hi = number(hi, offset + begin + dash + 1);
        if (range.hi < range.lo)
          fail(fmt::format("range \"{}\" runs backwards", r), offset + begin);
      }
      g.size += range.hi - range.lo + 1;
      if (g.size > max_hostlist_size)
        fail(fmt::format("expands to more than {} names", max_hostlist_size),
             offset + begin);
      g.ranges.push_back(range);
      if (comma == std::string_view::npos)
        return;
      begin = comma + 1;
    }
  }

  /// Reads the digits of `s`; anything else is an error at `pos`.
  uint64_t number(std::string_view s, size_t pos) const {
    if (s.empty())
      fail("a range needs a number", pos);
    if (s.size() > max_digits)
      fail(fmt::format("number \"{}\" has more than {} digits", s, max_digits),
           pos);
    uint64_t x = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] < '0' || s[k] > '9')
        fail(fmt::format("'{}' in a range (digits, '-' and ',' only)", s[k]),
             pos + k);
      x = x * 10 + static_cast<uint64_t>(s[k] - '0');
    }
    return x;
  }

  void add_names(uint64_t n) {
    if (names_.size() + n > max_hostlist_size)
      fail(fmt::format("expands to more than {} names", max_hostlist_size), 0);
  }

  std::string_view text_;
  std::vector<std::string> names_;
};

} // namespace

std::vector<std::string> expand_hostlist(std::string_view text) {
  return hostlist_parser{text}.run();
}

std::vector<uint32_t> expand_tasks_per_node(std::string_view text) {
  auto fail = [&](const std::string& what) {
    return input_error(fmt::format("bad Slurm task list \"{}\": {}", text,
                                   what));
  };
  // A count of tasks: 1 .. 2^31.
  auto count = [&](std::string_view s, const char* what) -> uint64_t {
    if (s.empty() || s.size() > 10
        || s.find_first_not_of("0123456789") != std::string_view::npos)
      throw fail(fmt::format("{} \"{}\" is not a whole number", what, s));
    uint64_t x = 0;
    for (auto c : s)
      x = x * 10 + static_cast<uint64_t>(c - '0');
    if (x == 0 || x > (uint64_t{1} << 31))
      throw fail(fmt::format("{} {} is out of range [1, 2^31]", what, x));
    return x;
  };
  if (text.empty())
    throw fail("the list is empty");
  std::vector<uint32_t> result;
  size_t begin = 0;
  for (;;) {
    auto comma = text.find(',', begin);
    auto item = text.substr(begin, comma == std::string_view::npos
                                     ? std::string_view::npos
                                     : comma - begin);
    if (item.empty())
      throw fail("empty entry");
    uint64_t reps = 1;
    auto paren = item.find('(');
    if (paren != std::string_view::npos) {
      auto rep = item.substr(paren);
      if (rep.size() < 4 || rep.compare(0, 2, "(x") != 0 || rep.back() != ')')
        throw fail(fmt::format("\"{}\": expected COUNT(xREPEAT)", item));
      reps = count(rep.substr(2, rep.size() - 3), "repetition");
    }
    auto c = count(item.substr(0, paren), "count");
    if (result.size() + reps > max_hostlist_size)
      throw fail(fmt::format("expands to more than {} entries",
                             max_hostlist_size));
    result.insert(result.end(), reps, static_cast<uint32_t>(c));
    if (comma == std::string_view::npos)
      return result;
    begin = comma + 1;
  }
}

} // namespace actorps
