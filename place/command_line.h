// gpuslice-place's command line: every option, its default and its check, filled into one
// struct that the modes (placement, replay, pool sweep) read.
#pragma once

#include <cstdint>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "place/experiment.h"
#include "place/mig.h"
#include "place/policy.h"
#include "place/replay.h"

namespace gpuslice::place {

struct PlaceCommand {
  std::string nodes_path, pods_path, policies_text, out_dir, title;
  std::string random_cluster_text, write_nodes_path;  // --random-cluster SPEC instead of --nodes
  int seeds = 10;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t first_seed = 42;
  double inflation = 1.3;
  bool quiet = false, no_chart = false, no_memory = false, gangs = false, nvlink_prefer = false, replay = false;
  ReplayOptions replay_options;
  int nvlink_island = 0;
  double nvlink_gbps = 300, pcie_gbps = 32;
  OurPolicyTuning tuning;
  double replay_chart_hours = 0;
  std::string tiers = "none";
  double tier_paid_fraction = 0.5;
  uint64_t tier_seed = 7;
  bool tiers_apart = false;
  MigOptions mig;
  std::string mig_nodes_text, pool_nodes_text, pool_sweep_text;
};

// Every policy's name, comma-separated: --policies' default and its error line.
std::string AllPolicies();

// Registers every option of *c with `app`.
void AddOptions(CLI::App& app, PlaceCommand* c);

}  // namespace gpuslice::place
