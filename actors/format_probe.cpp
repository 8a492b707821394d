#include "actors/format_probe.hpp"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "caf/actor_system.hpp"
#include "caf/blocking_actor.hpp"

#include "core/placement.hpp"
#include "core/wire_format.hpp"

namespace actorps {

namespace {

using std::chrono::steady_clock;

constexpr auto answer_timeout = std::chrono::seconds(10);

/// One pull of every group's dense values in `format` (null: fp32), sent to
/// all servers at once. Returns the seconds from the first send to the last
/// value decoded, or a negative number if a group answered with fewer values
/// than it holds (not all created yet). Adds the payload to `bytes`.
/// @throws std::runtime_error if a server fails or does not answer.
double pull_all(caf::blocking_actor* self, const std::vector<ps_actor>& servers,
                const placement& layout, const wire_format* format,
                uint64_t& bytes, std::vector<float>& scratch) {
  auto t0 = steady_clock::now();
  using handle = decltype(self->request(servers[0], answer_timeout,
                                        pull_atom_v, pull_request{}));
  std::vector<std::pair<uint32_t, handle>> sent;
  for (uint32_t p = 0; p < servers.size(); ++p) {
    if (layout.ps_sizes[p] == 0)
      continue;
    pull_request req;
    req.group = p;
    req.worker = no_worker;
    req.create = false;
    if (format != nullptr)
      req.format = format->name();
    sent.emplace_back(p, self->request(servers[p], answer_timeout,
                                       pull_atom_v, std::move(req)));
  }
  bool complete = true;
  for (auto& [p, h] : sent) {
    auto n = layout.ps_sizes[p];
    h.receive(
      [&](pull_reply& reply) {
        if (format == nullptr) {
          bytes += reply.values.values.size() * sizeof(float);
          complete = complete && reply.values.values.size() == n;
          return;
        }
        bytes += reply.encoded.bytes.size();
        if (reply.encoded.n != n) {
          complete = false;
          return;
        }
        scratch.resize(n);
        format->decode(reply.encoded, scratch.data(), n);
      },
      [&, p = p](caf::error& err) {
        if (err == errc::no_shards) {
          complete = false;
          return;
        }
        throw std::runtime_error(fmt::format(
          "a pull of group {} failed: {}", p, self->system().render(err)));
      });
  }
  if (!complete)
    return -1;
  return std::chrono::duration<double>(steady_clock::now() - t0).count();
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

} // namespace

std::string format_choice::describe() const {
  return fmt::format("a pull of every group's values took {:.2f} ms in fp32 "
                     "({} KB) and {:.2f} ms in the candidate ({} KB), "
                     "medians: {} for pushes and pulls",
                     fp32_ms, fp32_bytes / 1024, candidate_ms,
                     candidate_bytes / 1024, format);
}

format_choice probe_formats(caf::blocking_actor* self,
                            const std::vector<ps_actor>& servers,
                            const placement& layout,
                            const wire_format& candidate, int rounds,
                            std::chrono::milliseconds wait) {
  std::vector<float> scratch;
  uint64_t bytes = 0;
  // Wait for the coordinator to create every group's values.
  auto deadline = steady_clock::now() + wait;
  while (pull_all(self, servers, layout, nullptr, bytes, scratch) < 0) {
    if (steady_clock::now() > deadline)
      throw std::runtime_error(fmt::format(
        "the servers did not hold their values within {} ms", wait.count()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  format_choice out;
  std::vector<double> plain;
  std::vector<double> encoded;
  for (int i = 0; i < std::max(rounds, 1); ++i) {
    out.fp32_bytes = 0;
    out.candidate_bytes = 0;
    plain.push_back(pull_all(self, servers, layout, nullptr, out.fp32_bytes,
                             scratch));
    encoded.push_back(pull_all(self, servers, layout, &candidate,
                               out.candidate_bytes, scratch));
  }
  out.fp32_ms = 1e3 * median(plain);
  out.candidate_ms = 1e3 * median(encoded);
  out.format = out.candidate_ms <= 0.9 * out.fp32_ms ? candidate.name()
                                                       : std::string{"fp32"};
  return out;
}

} // namespace actorps
