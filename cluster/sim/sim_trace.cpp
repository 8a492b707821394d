#include "cluster/sim/sim_trace.hpp"

#include <openssl/evp.h>

#include <fmt/format.h>

#include "core/error.hpp"

namespace actorps {

struct sim_trace::hasher {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  hasher() {
    if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1)
      throw runtime_failure("simulate: cannot start a SHA-256 digest");
  }
  ~hasher() {
    EVP_MD_CTX_free(ctx);
  }
};

sim_trace::sim_trace(const std::string& record, const std::string& replay)
  : hash_(std::make_unique<hasher>()), replay_name_(replay) {
  if (!record.empty()) {
    record_.open(record, std::ios::out | std::ios::trunc);
    if (!record_)
      throw input_error(fmt::format("--record {}: cannot write it", record));
  }
  if (!replay.empty()) {
    replay_.open(replay);
    if (!replay_)
      throw input_error(fmt::format("--replay {}: cannot read it", replay));
  }
}

sim_trace::~sim_trace() = default;

void sim_trace::event(sim_time t, const char* what, uint32_t worker,
                      uint32_t ps, uint64_t closure, uint64_t bytes) {
  auto line = fmt::format("{} {} w{} ps{} c{} {}\n", t, what, worker, ps,
                          closure, bytes);
  ++events_;
  add(line.data(), line.size());
  if (record_.is_open())
    record_ << line;
  if (replay_.is_open() && mismatch_.empty()) {
    std::string expected;
    if (!std::getline(replay_, expected))
      mismatch_ = fmt::format(
        "--replay {}: event {} is \"{}\", but the recorded run ended after "
        "{} events",
        replay_name_, events_, line.substr(0, line.size() - 1), events_ - 1);
    else if (expected + "\n" != line)
      mismatch_ = fmt::format(
        "--replay {}: event {} differs: recorded \"{}\", this run \"{}\"",
        replay_name_, events_, expected, line.substr(0, line.size() - 1));
  }
}

void sim_trace::add(const void* data, size_t size) {
  EVP_DigestUpdate(hash_->ctx, data, size);
}

std::string sim_trace::finish() {
  if (!mismatch_.empty())
    throw runtime_failure(mismatch_);
  if (replay_.is_open()) {
    std::string more;
    if (std::getline(replay_, more))
      throw runtime_failure(fmt::format(
        "--replay {}: this run ended after {} events, the recorded one goes "
        "on with \"{}\"",
        replay_name_, events_, more));
  }
  if (record_.is_open())
    record_.flush();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(hash_->ctx, md, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i)
    hex += fmt::format("{:02x}", md[i]);
  return hex;
}

} // namespace actorps
