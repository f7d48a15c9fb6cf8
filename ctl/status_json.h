// `gpuslicectl status --json` for machines: the same content as the table, bytes as integers,
// keys in the order below (ordered_json) so that a person reading it finds names before numbers.
//
// {"state_file": str, "layout_version": int,
//  "gpus": [{"uuid": "GPU-...", "total_memory_bytes": int,
//            "mig": {"uuid": "MIG-...", "profile": str, "gpu_index": int, "gpu_uuid": "GPU-..."} | null,
//                                            // a MIG instance (its UUID as the broker keys it in "uuid"),
//                                            // as NVML reports it; null: a whole GPU, or no NVML
//            "device": {"index": int, "name": str, "memory_used_bytes": int, "memory_free_bytes": int,
//                       "utilization_percent": int | null, "compute_processes": int | null,
//                       "processes": [{"pid": int, "name": str, "memory_bytes": int | null}]} | null,
//                                            // NVML's figures for a whole GPU; null: a MIG instance, or no NVML
//            "accounted_bytes": int,         // what the tenants of this state directory hold on it
//            "unaccounted_bytes": int | null, // in use on the device beyond that; null without "device"
//            "unaccounted_held_elsewhere": bool | null,  // beyond driver-internal memory (broker/unaccounted.h)
//            "memory_enforcement": "preload" | "preload+driver" | "preload (MIG)" | null,
//                                            // ctl/status_enforcement.h; null: NVML cannot say
//            "quota_committed_bytes": int,   // sum of the active tenants' finite quotas
//            "memory_requests_bytes": int,   // sum of their memory requests
//            "memory_borrowed_bytes": int,   // what they hold beyond their requests
//            "unlimited_tenants": int,       // active tenants without a quota
//            "idle_tenants": int,            // tenants not counted (status_report.h)
//            "oversubscribed": bool,
//            "mode": "timeslice" | "none" | "mps",
//            "quantum_ns": int,              // in force (the default when none was set)
//            "quantum_default": bool,        // true: no quantum set, the built-in default applies
//            "holder": str | null,           // tenant holding the GPU; null: nobody
//            "closing": bool,                // the holder is draining to hand over
//            "waiting_processes": int,       // processes of any tenant waiting for the grant
//            "grants": int,                  // grants made so far
//            "grant_time_ns": {"grant_start_idle": int, "holder_idle": int, "drain": int,
//                              "unheld_waiting": int},  // where grant time went, summed at hand-overs
//            "compute_requested_percent": int, // sum of the active tenants' requests
//            "compute_unset_tenants": int,   // active tenants that have not launched yet
//            "compute_oversubscribed": bool, // requests over 100%: shared in proportion
//            "share_window_ended_seconds_ago": float | null,  // null: no complete window yet
//            "tenants": [{"name": str,
//                         "pod": {"namespace": str, "name": str, "container": str} | null,  // Kubernetes
//                         "used_bytes": int,
//                         "quota_bytes": int | null,          // the limit; null: no quota
//                         "memory_request_bytes": int,        // 0: no request
//                         "borrowed_bytes": int,              // used beyond the request
//                         "request_announced_by": str | null, // "gpuslice-dra-driver", ...
//                         "driver_enforced": {"hard_bytes": int, "soft_bytes": int, "containers": int} | null,
//                         "used_percent_of_quota": float | null,
//                         "idle": bool,
//                         "compute_request_percent": int | null,  // null: not launched yet
//                         "compute_limit_percent": int | null,
//                         "last_window_share_percent": float | null,  // null: not measured yet
//                         "compute_service_ns": int,          // device time granted so far
//                         "waiting_processes": int,
//                         "processes": [{"pid": int, "charged_bytes": int}]}]}]}
#pragma once

#include <nlohmann/json.hpp>

#include "broker/snapshot.h"
#include "common/pod_names.h"
#include "ctl/mig_topology.h"
#include "ctl/status_device.h"
#include "ctl/status_enforcement.h"

namespace gpuslice::ctl {

// Expects SortForDisplay to have run.
nlohmann::ordered_json StatusJson(const broker::Snapshot& snapshot, const MigTopology& mig = {},
                                  const DeviceFiguresByUuid& devices = {}, const PodNames& pods = {},
                                  const EnforcementByGpu& enforcement = {});

}  // namespace gpuslice::ctl
