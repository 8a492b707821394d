#pragma once

#include <memory>
#include <string>

#include "cluster/launch/node_launcher.hpp"
#include "cluster/spec/slurm_resolver.hpp"

namespace actorps {

/// Starts every node as its own job step of the Slurm allocation this
/// process runs in (salloc, sbatch):
///
///     srun --nodes=1 --ntasks=1 --nodelist=HOST --exact --export=ALL
///          --quit-on-interrupt --job-name=NAME -- actorps node ...
///
/// with the cluster spec in TF_CONFIG. The nodes take the allocation's task
/// slots (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE) in Slurm's block order
/// and the roles of the slurm cluster resolver (cluster/spec/slurm_resolver.hpp):
/// the coordinator the first slot, then the ps, then the workers; ports
/// opts.port_base + the node's index on its host (attempt k adds k x the
/// most nodes on one host). Each step gets the CPUs of one task (--exact;
/// `sbatch -c N` gives each N); srun's own variables still apply
/// (SLURM_OVERLAP=1 shares the allocation's CPUs and memory instead).
/// A node that dies ends its srun with 128 + the signal, which run_children
/// counts as a crash and answers with a new step, within the restart budget.
/// A stop goes to srun as SIGUSR1 (srun answers SIGTERM by killing its task;
/// SIGUSR1 it passes on, and actorps node takes it as SIGTERM).
/// @throws input_error outside an allocation, with no srun on PATH, or for
///         the allocation's variables as read_slurm_allocation.
std::unique_ptr<node_launcher> make_slurm_launcher(const launcher_options& opts);

/// The same with the environment, host-list expansion and srun program
/// given (for tests; nothing is looked up on PATH).
std::unique_ptr<node_launcher>
make_slurm_launcher(const launcher_options& opts, const env_reader& env,
                    const hostlist_expander& expand, std::string srun);

} // namespace actorps
