// `gpuslicectl status --json` for machines: the same content as the table, bytes as integers,
// keys in the order below (ordered_json) so that a person reading it finds names before numbers.
//
// {"state_file": str, "layout_version": int,
//  "gpus": [{"uuid": "GPU-...", "total_memory_bytes": int,
//            "quota_committed_bytes": int,   // sum of the active tenants' finite quotas
//            "unlimited_tenants": int,       // active tenants without a quota
//            "idle_tenants": int,            // tenants not counted (status_report.h)
//            "oversubscribed": bool,
//            "tenants": [{"name": str, "used_bytes": int,
//                         "quota_bytes": int | null,          // null: no quota
//                         "used_percent_of_quota": float | null,
//                         "idle": bool,
//                         "processes": [{"pid": int, "charged_bytes": int}]}]}]}
#pragma once

#include <nlohmann/json.hpp>

#include "broker/broker.h"

namespace gpuslice::ctl {

// Expects SortForDisplay to have run.
nlohmann::ordered_json StatusJson(const broker::Snapshot& snapshot);

}  // namespace gpuslice::ctl
