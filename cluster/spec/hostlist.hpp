#pragma once

// Slurm's two compressed list formats: host lists ("node[01-03,07],gpu5")
// and task counts per node ("2(x3),1"). Pure functions: no environment, no
// process; cluster/spec/slurm_resolver.hpp reads them from Slurm's variables.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace actorps {

/// The most names one host list or task list may expand to (64 Ki: each
/// name is a node of the cluster, and no actorps cluster comes near). Larger
/// ones are refused before they are built. It was 1 Mi until fuzzing
/// (fuzz/hostlist_fuzz.cpp) found lists whose expansion to a million names
/// took over 10 s.
inline constexpr size_t max_hostlist_size = size_t{1} << 16;

/// Expands a Slurm host list into host names, in order, duplicates kept:
///
///     "node[01-03,07],gpu5"  ->  node01 node02 node03 node07 gpu5
///     "rack[1-2]-n[1-2]"     ->  rack1-n1 rack1-n2 rack2-n1 rack2-n2
///     "n[8-11]" -> n8 n9 n10 n11;   "n[08-11]" -> n08 n09 n10 n11
///
/// Grammar: entries separated by ',' or whitespace; an entry is text and
/// bracket groups `[r,r,...]`, each range r a number `N` or `N-M` with
/// N <= M, digits only. Every number is written with at least as many digits
/// as N has as given (zero-padded: "[001-10]" gives 001 ... 010). Several
/// groups in one entry give every combination, the first group varying
/// slowest. Host-name characters are anything printable but '[', ']', ','
/// and whitespace.
///
/// This is what `scontrol show hostnames` prints for the same text (checked
/// against Slurm 22.05 in test/slurm_test.sh), except that this parser
/// refuses what scontrol reads loosely or wrongly: an empty entry (",,"), an
/// unclosed '[' (scontrol: "n[1-2" gives "n]"), an open range "[1-]", and
/// numbers of more than 18 digits. Like Slurm 22.05 it refuses text after the
/// last ']' of an entry ("n[1-2]-ib").
///
/// @throws input_error `bad Slurm host list "<text>": <what> (at character
///         <i>)`: an empty list or entry, '[' inside brackets or unclosed,
///         ']' without '[', an empty group or range, a non-digit in a range,
///         N > M, a number of more than 18 digits, text after the last ']',
///         a control character, or more than max_hostlist_size names.
std::vector<std::string> expand_hostlist(std::string_view text);

/// Expands Slurm's tasks-per-node list (SLURM_STEP_TASKS_PER_NODE,
/// SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE): comma-separated counts,
/// each optionally repeated as `C(xR)`:
///
///     "2(x3),1"  ->  2 2 2 1
///
/// Counts and repetitions are whole numbers >= 1 without sign or spaces.
/// @throws input_error `bad Slurm task list "<text>": <what>`: empty, a
///         count or repetition that is 0, not a number or over 2^31, a
///         malformed "(xR)", or more than max_hostlist_size entries.
std::vector<uint32_t> expand_tasks_per_node(std::string_view text);

} // namespace actorps
