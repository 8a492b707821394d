#include "cluster/services/scale_input.hpp"

#include <algorithm>
#include <cerrno>

#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include "cluster/job/cluster.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace actorps {

namespace {

/// The window of the speed lines, seconds.
constexpr int speed_window_s = 3;

/// Longest command line kept; longer input is cut there.
constexpr size_t max_command = 256;

} // namespace

scale_input::scale_input(int fd) : fd_(fd) {
  // nop
}

scale_input::~scale_input() {
  stop();
}

void scale_input::on_train_begin(fit_state&) {
  started_ = clock::now();
  if (reader_.joinable())
    return;
  reader_ = std::thread{[this] { read_lines(); }};
}

void scale_input::read_lines() {
  std::string pending;
  char buf[512];
  while (!stopping_.load()) {
    pollfd p{fd_, POLLIN, 0};
    auto rc = ::poll(&p, 1, 100);
    if (rc < 0 && errno != EINTR)
      return;
    if (rc <= 0)
      continue;
    auto n = ::read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return; // EOF: launch is gone or closed it
    pending.append(buf, static_cast<size_t>(n));
    for (auto nl = pending.find('\n'); nl != std::string::npos;
         nl = pending.find('\n')) {
      auto line = pending.substr(0, std::min(nl, max_command));
      pending.erase(0, nl + 1);
      std::lock_guard<std::mutex> guard{mtx_};
      lines_.push_back(std::move(line));
    }
    if (pending.size() > max_command)
      pending.clear(); // garbage without a newline
  }
}

void scale_input::on_step_end(fit_state&, const step_result& r) {
  auto now = clock::now();
  samples_.emplace_back(now, r.samples);
  while (!samples_.empty()
         && now - samples_.front().first > std::chrono::minutes(1))
    samples_.pop_front();
}

double scale_input::examples_between(clock::time_point from,
                                     clock::time_point to) const {
  double sum = 0;
  for (auto& [when, n] : samples_)
    if (when >= from && when < to)
      sum += static_cast<double>(n);
  return sum;
}

void scale_input::act(fit_state& st) {
  auto now = clock::now();
  const auto window = std::chrono::seconds(speed_window_s);
  // The "after" lines that are due.
  for (auto it = due_.begin(); it != due_.end();) {
    if (now < it->first) {
      ++it;
      continue;
    }
    auto rate = examples_between(it->first - window, it->first)
                / speed_window_s;
    log::info("coordinator", -1, "scale: {}: {:.0f} samples/s in the {} s "
              "after",
              it->second, rate, speed_window_s);
    it = due_.erase(it);
  }
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    lines.swap(lines_);
  }
  for (auto& line : lines) {
    std::string text = line;
    if (line.rfind("mark ", 0) != 0) {
      try {
        auto f = parse_fault(line + "@0");
        bool membership = f.action == fault_spec::kind::join
                          || f.action == fault_spec::kind::leave;
        if (!membership || (f.action == fault_spec::kind::join
                            && f.role != "ps"))
          throw input_error(fmt::format("\"{}\": only join:ps, leave:ps:N "
                                        "and leave:worker:I come this way",
                                        line));
        text = to_string(f);
        text.erase(text.rfind('@'));
        log::info("coordinator", -1, "scale: {} (asked through launch, at "
                  "step {})",
                  text, st.progress.global_step);
        st.cl->inject(f);
      } catch (const input_error& e) {
        log::warn("coordinator", -1, "scale: ignored a command: {}", e.what());
        continue;
      }
    } else {
      text = line.substr(5);
    }
    // (A change early in the run: the time since training started.)
    auto from = std::max(now - window, started_);
    auto secs = std::chrono::duration<double>(now - from).count();
    auto rate = secs > 0 ? examples_between(from, now) / secs : 0.0;
    log::info("coordinator", -1, "scale: {}: {:.0f} samples/s in the {:.1f} "
              "s before",
              text, rate, secs);
    due_.emplace_back(now + window, text);
  }
}

void scale_input::on_wait(fit_state& st, uint64_t) {
  act(st);
}

void scale_input::on_pause(fit_state& st) {
  act(st);
}

std::chrono::milliseconds scale_input::poll_interval(const fit_state&) const {
  return std::chrono::milliseconds(50);
}

void scale_input::on_train_end(fit_state&) {
  stop();
  // Changes close to the end: their "after" over what was left.
  auto now = clock::now();
  const auto window = std::chrono::seconds(speed_window_s);
  for (auto& [due, text] : due_) {
    auto from = due - window;
    auto secs = std::chrono::duration<double>(now - from).count();
    if (secs <= 0)
      continue;
    log::info("coordinator", -1, "scale: {}: {:.0f} samples/s in the {:.1f} "
              "s after (to the end of training)",
              text, examples_between(from, now) / secs, secs);
  }
  due_.clear();
}

void scale_input::stop() {
  stopping_ = true;
  if (reader_.joinable())
    reader_.join();
}

} // namespace actorps
