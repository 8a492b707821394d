#include "core/libsvm.hpp"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <zlib.h>

#include "core/bad_record.hpp"
#include "core/error.hpp"
#include "core/job_config.hpp"
#include "core/memory_provider.hpp"
#include "core/options.hpp"

namespace actorps {

namespace {

/// Reads a plain or gzip-compressed text file line by line through one fixed
/// buffer: a line is a view into the buffer, valid until the next call. Lines
/// longer than `max_line` are an error before anything is allocated for them.
class line_reader {
public:
  line_reader(const std::string& path, uint64_t max_line)
    : path_(path),
      max_line_(max_line),
      size_(4 * max_line + 65536),
      // Not zeroed: only the pages gzread fills are touched (a 100-byte file
      // touched 4 MiB before; under the fuzzer that was 90% of the time).
      buf_(new char[size_]) {
    f_ = gzopen(path.c_str(), "rb");
    if (f_ == nullptr)
      throw input_error(fmt::format("{}: cannot open file (missing or not "
                                    "readable)",
                                    path));
    gzbuffer(f_, 256 * 1024);
  }

  ~line_reader() {
    if (f_ != nullptr)
      gzclose(f_);
  }

  line_reader(const line_reader&) = delete;
  line_reader& operator=(const line_reader&) = delete;

  /// The next line without its "\n" (or "\r\n"); false at the end.
  bool next(std::string_view& line) {
    for (;;) {
      auto* first = buf_.get() + begin_;
      auto* nl = static_cast<char*>(std::memchr(first, '\n', end_ - begin_));
      if (nl != nullptr || (eof_ && begin_ < end_)) {
        size_t len = nl != nullptr ? static_cast<size_t>(nl - first)
                                   : end_ - begin_;
        ++line_no_;
        if (len > max_line_)
          too_long();
        begin_ += len + (nl != nullptr ? 1 : 0);
        if (len > 0 && first[len - 1] == '\r')
          --len;
        line = std::string_view{first, len};
        return true;
      }
      if (eof_)
        return false;
      if (end_ - begin_ > max_line_) {
        ++line_no_;
        too_long();
      }
      std::memmove(buf_.get(), first, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
      fill();
    }
  }

  /// 1-based number of the line last returned.
  uint64_t line_no() const noexcept {
    return line_no_;
  }

private:
  void fill() {
    auto room = static_cast<unsigned>(size_ - end_);
    int got = gzread(f_, buf_.get() + end_, room);
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(f_, &code);
      throw input_error(fmt::format("{}: corrupt compressed data after line "
                                    "{} ({})",
                                    path_, line_no_, msg ? msg : "unknown"));
    }
    if (got == 0) {
      // A truncated gzip stream ends with 0 and Z_BUF_ERROR ("unexpected end
      // of file"), not with -1.
      int code = 0;
      const char* msg = gzerror(f_, &code);
      if (code != Z_OK)
        throw input_error(fmt::format("{}: truncated or corrupt compressed "
                                      "data after line {} ({})",
                                      path_, line_no_,
                                      msg ? msg : "unknown"));
      eof_ = true;
    }
    end_ += static_cast<size_t>(got);
  }

  [[noreturn]] void too_long() const {
    throw input_error(fmt::format("{}:{}: line is longer than {} bytes "
                                  "({} MiB), not a LIBSVM example",
                                  path_, line_no_, max_line_,
                                  max_line_ >> 20));
  }

  const std::string& path_;
  uint64_t max_line_;
  gzFile f_ = nullptr;
  size_t size_;
  std::unique_ptr<char[]> buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  uint64_t line_no_ = 0;
};

bool blank(char c) {
  return c == ' ' || c == '\t';
}

/// Parses all of `tok` as a number (an optional leading '+' allowed).
template <class T>
bool parse_number(std::string_view tok, T& out) {
  // from_chars takes no '+'; it rejects a second one, and '-' for unsigned.
  if (!tok.empty() && tok.front() == '+')
    tok.remove_prefix(1);
  auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), out);
  return ec == std::errc{} && end == tok.data() + tok.size();
}

/// The bounds of a file's indices: keys are index - base, in [0, num_features).
struct libsvm_index_range {
  uint64_t base;
  uint64_t last;
  uint64_t num_features;
};

/// Parses one line: an example's keys and values are appended to `feat`
/// (its offsets are the caller's) and its label set, and "" returned; a line
/// of blanks sets blank_line and returns ""; otherwise returns what is
/// wrong, with feat as it was.
std::string parse_libsvm_line(std::string_view line, const libsvm_index_range& r,
                       example_batch::field& feat, int32_t& label,
                       bool& blank_line) {
  const auto keys_before = feat.keys.size();
  auto fail = [&](std::string what) {
    feat.keys.resize(keys_before);
    feat.values.resize(keys_before);
    return what;
  };
  size_t i = 0;
  auto next_token = [&](std::string_view& tok) {
    while (i < line.size() && blank(line[i]))
      ++i;
    size_t start = i;
    while (i < line.size() && !blank(line[i]))
      ++i;
    tok = line.substr(start, i - start);
    return !tok.empty();
  };
  std::string_view tok;
  blank_line = !next_token(tok);
  if (blank_line)
    return {};
  double value_of_label = 0;
  if (!parse_number(tok, value_of_label)
      || (value_of_label != 1 && value_of_label != -1 && value_of_label != 0))
    return fail(fmt::format("label {} is not one of +1, 1, -1, 0",
                            quoted(tok)));
  auto prev = std::numeric_limits<uint64_t>::max(); // none yet
  while (next_token(tok)) {
    auto colon = tok.find(':');
    if (colon == std::string_view::npos)
      return fail(fmt::format("expected index:value, got {}", quoted(tok)));
    uint64_t index = 0;
    float value = 0;
    if (!parse_number(tok.substr(0, colon), index))
      return fail(fmt::format("index {} is not a whole number",
                              quoted(tok.substr(0, colon))));
    if (!parse_number(tok.substr(colon + 1), value) || !std::isfinite(value))
      return fail(fmt::format("value {} of index {} is not a finite number",
                              quoted(tok.substr(colon + 1)), index));
    if (index < r.base)
      return fail(fmt::format("index {} is below the first index {} ({}-based "
                              "file)",
                              index, r.base, r.base));
    if (index > r.last)
      return fail(fmt::format("index {} is above the last feature {} "
                              "(num_features {})",
                              index, r.last, r.num_features));
    if (prev != std::numeric_limits<uint64_t>::max() && index <= prev)
      return fail(fmt::format("index {} after {}: indices must be strictly "
                              "ascending",
                              index, prev));
    prev = index;
    feat.keys.push_back(index - r.base);
    feat.values.push_back(value);
  }
  label = value_of_label == 1 ? 1 : 0;
  return {};
}

/// load_libsvm and read_libsvm_part: every unusable line goes to `bad`.
dataset read_libsvm_lines(const std::string& path, uint64_t num_features,
                    bool one_based, uint64_t limit, bad_record_sink& bad) {
  if (num_features == 0)
    throw input_error(fmt::format("{}: num_features must be at least 1",
                                  path));
  line_reader in{path, libsvm_max_line};
  dataset result;
  result.schema = libsvm_schema(num_features);
  auto& ex = result.examples;
  ex.reset(0, 1);
  auto& feat = ex.fields[0];
  const uint64_t base = one_based ? 1 : 0;
  const libsvm_index_range range{base, num_features - 1 + base, num_features};
  std::string_view line;
  while ((limit == 0 || ex.rows < limit) && in.next(line)) {
    int32_t label = 0;
    bool blank_line = false;
    auto what = parse_libsvm_line(line, range, feat, label, blank_line);
    if (!what.empty()) {
      bad.report(path, in.line_no(), what);
      continue;
    }
    if (blank_line)
      continue;
    feat.offsets.push_back(feat.keys.size());
    ex.labels.push_back(label);
    ++ex.rows;
  }
  return result;
}

} // namespace

data_schema libsvm_schema(uint64_t num_features) {
  data_schema s;
  s.fields.push_back(field_schema{"features", num_features, true});
  s.labels = label_kind::binary;
  s.classes = 2;
  return s;
}

dataset load_libsvm(const std::string& path, uint64_t num_features,
                    bool one_based, uint64_t limit) {
  bad_record_sink first_fails{on_bad_record::fail};
  return read_libsvm_lines(path, num_features, one_based, limit, first_fails);
}

dataset read_libsvm_part(const std::string& path, const data_schema& schema,
                         bool one_based, bad_record_sink& bad) {
  if (schema.dense_dim != 0 || schema.fields.size() != 1
      || !schema.fields[0].weighted || schema.fields[0].vocabulary == 0
      || schema.labels != label_kind::binary)
    throw std::invalid_argument("read_libsvm_part: not a schema of "
                                "libsvm_schema()");
  return read_libsvm_lines(path, schema.fields[0].vocabulary, one_based, 0, bad);
}

// -- the datasets libsvm and a9a ----------------------------------------------

namespace {

std::unique_ptr<data_provider>
libsvm_provider(const std::string& name, const std::string& train_path,
                const std::string& test_path, uint64_t num_features,
                bool one_based, const job_config& cfg) {
  auto train_limit = cfg.train_limit;
  auto test_limit = cfg.test_limit;
  return std::make_unique<memory_provider>(
    fmt::format("{} from {} and {}", name, train_path, test_path),
    [=] { return load_libsvm(train_path, num_features, one_based,
                             train_limit); },
    [=] { return load_libsvm(test_path, num_features, one_based,
                             test_limit); },
    libsvm_schema(num_features));
}

} // namespace

std::unique_ptr<data_provider> open_libsvm(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "libsvm"};
  for (auto field : {"train_file", "test_file", "num_features"})
    if (!opts.has(field))
      throw input_error(fmt::format("data.{}: required for libsvm", field));
  auto train_file = opts.get_string("train_file", "");
  auto test_file = opts.get_string("test_file", "");
  auto num_features = opts.get_uint("num_features", 0, 1, uint64_t{1} << 40);
  auto one_based = opts.get_bool("one_based", true);
  opts.finish();
  if (train_file.empty() || test_file.empty())
    throw input_error(fmt::format("data.{}: must name a file",
                                  train_file.empty() ? "train_file"
                                                     : "test_file"));
  auto dir = dataset_dir(cfg, "");
  return libsvm_provider("libsvm", resolve_data_file(dir, train_file),
                         resolve_data_file(dir, test_file), num_features,
                         one_based, cfg);
}

std::unique_ptr<data_provider> open_a9a(const job_config& cfg) {
  option_reader opts{cfg.data_options, "data", "a9a"};
  opts.finish();
  auto dir = dataset_dir(cfg, "data/a9a");
  return libsvm_provider("a9a", resolve_data_file(dir, "a9a.gz"),
                         resolve_data_file(dir, "a9a.t.gz"), 123, true, cfg);
}

} // namespace actorps
