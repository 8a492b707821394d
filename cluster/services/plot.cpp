#include "cluster/services/plot.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <unistd.h>

#include <fmt/format.h>

#include "cluster/spec/subprocess.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

/// Whether an executable `name` is on PATH.
bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    auto end = dirs.find(':', begin);
    if (end == std::string::npos)
      end = dirs.size();
    auto dir = dirs.substr(begin, end - begin);
    auto file = (dir.empty() ? std::string{"."} : dir) + "/" + name;
    if (::access(file.c_str(), X_OK) == 0)
      return true;
    begin = end + 1;
  }
  return false;
}

/// A gnuplot string literal: single quotes, a quote doubled.
std::string gnuplot_string(const std::string& text) {
  std::string out = "'";
  for (auto c : text) {
    out += c;
    if (c == '\'')
      out += '\'';
  }
  return out + "'";
}

/// The gnuplot script that draws `epochs` into `output`.
std::string script(const std::string& output,
                   const std::vector<epoch_metrics>& epochs,
                   const std::string& title) {
  // Columns: epoch, train_loss, then the test metrics of the first epoch in
  // its order (test_loss first for the built-in models).
  std::vector<std::string> names;
  for (auto& entry : epochs.front().test)
    names.push_back(entry.first);
  std::string s;
  s += "set terminal pngcairo size 1000,420 noenhanced\n";
  s += "set output " + gnuplot_string(output) + "\n";
  s += "$d << EOD\n";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (auto& m : epochs) {
    s += fmt::format("{} {:.9g}", m.epoch, m.train_loss);
    for (auto& name : names)
      s += fmt::format(" {:.9g}", metric_value(m.test, name, nan));
    s += "\n";
  }
  s += "EOD\n";
  s += "set datafile missing 'nan'\n";
  s += "set grid\nset xlabel 'epoch'\nset format x '%g'\n";
  if (epochs.size() <= 20)
    s += "set xtics 1\n"; // whole epochs only
  bool others = false;
  for (auto& name : names)
    others = others || name != "test_loss";
  s += fmt::format("set multiplot layout 1,{} title {}\n", others ? 2 : 1,
                   gnuplot_string(title));
  s += "set ylabel 'loss (nats per example)'\n";
  s += "plot $d using 1:2 with linespoints title 'train_loss'";
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == "test_loss")
      s += fmt::format(", $d using 1:{} with linespoints title 'test_loss'",
                       i + 3);
  s += "\n";
  if (others) {
    s += "set ylabel 'accuracy / AUC'\nset key bottom right\n";
    std::string plot;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "test_loss")
        continue;
      plot += fmt::format("{}$d using 1:{} with linespoints title {}",
                          plot.empty() ? "plot " : ", ", i + 3,
                          gnuplot_string(names[i]));
    }
    s += plot + "\n";
  }
  s += "unset multiplot\n";
  return s;
}

} // namespace

void check_plot(const std::string& path) {
  if (path.empty())
    throw input_error("--plot: needs a file name (FILE.png)");
  if (!on_path("gnuplot"))
    throw input_error("--plot: gnuplot not found on PATH; install Debian's "
                      "gnuplot-nox (scripts/setup.sh does)");
  auto tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr)
    throw input_error(fmt::format("--plot: cannot write {}: {}", tmp,
                                  std::strerror(errno)));
  std::fclose(f);
  std::remove(tmp.c_str());
}

void write_plot(const std::string& path,
                const std::vector<epoch_metrics>& epochs,
                const std::string& title) {
  check_plot(path);
  if (epochs.empty())
    throw runtime_failure(fmt::format("--plot {}: no epoch to plot", path));
  auto tmp = path + ".tmp";
  const char* dir = std::getenv("TMPDIR");
  std::string script_path = dir != nullptr && *dir != '\0' ? dir : "/tmp";
  script_path += "/actorps-plot-XXXXXX.gp";
  int fd = ::mkstemps(script_path.data(), 3);
  if (fd < 0)
    throw runtime_failure(fmt::format("--plot: cannot create {}: {}",
                                      script_path, std::strerror(errno)));
  auto text = script(tmp, epochs, title);
  bool written = ::write(fd, text.data(), text.size())
                 == static_cast<ssize_t>(text.size());
  ::close(fd);
  program_output out;
  if (written)
    out = run_program({"gnuplot", script_path}, std::chrono::seconds(60));
  std::remove(script_path.c_str());
  if (!written)
    throw runtime_failure("--plot: cannot write the gnuplot script");
  if (!out.output.empty())
    std::fputs(out.output.c_str(), stderr);
  if (!out.started || out.status != 0) {
    std::remove(tmp.c_str());
    throw runtime_failure(fmt::format(
      "--plot {}: gnuplot {} ({})", path,
      out.started ? fmt::format("failed with status {}", out.status)
                  : std::string{"could not be started"},
      out.timed_out ? "it ran for more than 60 s" : "its messages above"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw runtime_failure(fmt::format("--plot: cannot rename {} to {}: {}", tmp,
                                      path, std::strerror(errno)));
}

plot_callback::plot_callback(std::string path, std::string title)
  : path_(std::move(path)), title_(std::move(title)) {
  check_plot(path_);
}

void plot_callback::on_train_end(fit_state& st) {
  if (st.history.empty()) {
    log::warn("coordinator", -1, "--plot {}: no epoch completed, no plot",
              path_);
    return;
  }
  write_plot(path_, st.history, title_);
  log::info("coordinator", -1, "plot {} ({} epochs)", path_,
            st.history.size());
}

} // namespace actorps
