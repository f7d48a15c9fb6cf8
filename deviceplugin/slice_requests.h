// The slices' memory held as their tenant's request from Allocate on, before the container
// starts, so that no borrower takes memory the kubelet gave the pod (docs/accounting.md,
// "Requests and limits"). The device plugin API never says when a pod is gone: the kubelet's
// pod-resources API does. A request is withdrawn once two successive Lists in a row no longer
// show its tenant's slices (one List may run between Allocate and the container's admission);
// nothing is withdrawn after a List that had to leave containers out. Without a pod-resources
// socket nothing would ever withdraw them, so requests are then held by the tenant's processes
// alone (from their first CUDA call).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "broker/attach_on_use.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "deviceplugin/container_allocation.h"

namespace gpuslice::deviceplugin {

class SliceRequests {
 public:
  explicit SliceRequests(std::string state_dir) : broker_(std::move(state_dir)) {}

  // Holds the tenant's request on every device of `memory`. An error with the broker's line when
  // the requests held on a device would exceed it (nothing held then); when borrowers hold the
  // memory, the request is held all the same and *warning names them.
  Status Hold(const std::string& tenant, const std::vector<SliceMemory>& memory, std::string* warning) EXCLUDES(mutex_);
  // After a List that named every container holding slices (`live`: their tenants): withdraws
  // the requests of tenants missing from it twice in a row. Returns the tenants withdrawn.
  std::vector<std::string> Reconcile(const std::set<std::string>& live) EXCLUDES(mutex_);

 private:
  Mutex mutex_;
  broker::AttachOnUse broker_ GUARDED_BY(mutex_);
  std::set<std::string> missing_once_ GUARDED_BY(mutex_);
};

}  // namespace gpuslice::deviceplugin
