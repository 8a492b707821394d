// Fuzz target: Slurm's compressed lists as the Slurm resolver reads them
// from its environment (SLURM_JOB_NODELIST "node[01-03,07],gpu5";
// SLURM_STEP_TASKS_PER_NODE "2(x3),1").
//
// Input: the first byte picks what is parsed (even: a host list; odd: a task
// list); the rest is the text.
//
// Properties: expand_hostlist and expand_tasks_per_node return a list or
// throw input_error. A list they return has 1 .. max_hostlist_size entries;
// every host name is non-empty and free of '[', ']', ',', whitespace and
// control characters, so the names joined with ',' expand to the same list;
// every task count is in [1, 2^31], and the counts joined with ',' expand to
// the same list.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/spec/hostlist.hpp"
#include "core/error.hpp"
#include "fuzz/fuzz_util.hpp"

using namespace actorps;

namespace {

/// Round trips are checked on lists up to this long (a longer one is legal
/// but would make each run slow).
constexpr size_t max_round_trip = 4096;

void fuzz_hosts(const std::string& text) {
  std::vector<std::string> names;
  try {
    names = expand_hostlist(text);
  } catch (const input_error&) {
    return;
  }
  fuzz::check(!names.empty() && names.size() <= max_hostlist_size,
              "expand_hostlist returned no names or too many");
  std::string joined;
  for (auto& name : names) {
    fuzz::check(!name.empty(), "expand_hostlist returned an empty name");
    for (unsigned char c : name)
      fuzz::check(c != '[' && c != ']' && c != ',' && !std::isspace(c)
                    && !std::iscntrl(c),
                  "a host name holds a separator or control character");
    if (names.size() <= max_round_trip) {
      if (!joined.empty())
        joined += ',';
      joined += name;
    }
  }
  if (names.size() > max_round_trip)
    return;
  try {
    fuzz::check(expand_hostlist(joined) == names,
                "host names joined with ',' expand to another list");
  } catch (const input_error& e) {
    fuzz::fail("expanded host names do not read back: " + joined + ": "
               + e.what());
  }
}

void fuzz_tasks(const std::string& text) {
  std::vector<uint32_t> counts;
  try {
    counts = expand_tasks_per_node(text);
  } catch (const input_error&) {
    return;
  }
  fuzz::check(!counts.empty() && counts.size() <= max_hostlist_size,
              "expand_tasks_per_node returned no counts or too many");
  std::string joined;
  for (auto c : counts) {
    fuzz::check(c >= 1 && c <= (uint64_t{1} << 31),
                "a task count is out of [1, 2^31]");
    if (counts.size() <= max_round_trip) {
      if (!joined.empty())
        joined += ',';
      joined += std::to_string(c);
    }
  }
  if (counts.size() > max_round_trip)
    return;
  try {
    fuzz::check(expand_tasks_per_node(joined) == counts,
                "task counts joined with ',' expand to another list");
  } catch (const input_error& e) {
    fuzz::fail("expanded task counts do not read back: " + joined + ": "
               + e.what());
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::input in{data, size};
  auto mode = in.u8();
  auto text = in.rest();
  if (mode % 2 == 0)
    fuzz_hosts(text);
  else
    fuzz_tasks(text);
  return 0;
}
