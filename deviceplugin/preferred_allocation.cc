#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <set>

namespace gpuslice::deviceplugin {

bool PreferUnits(const DeviceCatalog& catalog, UnitKind kind, const std::vector<std::string>& available,
                 const std::vector<std::string>& must_include, int size, std::vector<std::string>* chosen,
                 std::string* error) {
  chosen->clear();
  const std::set<std::string> required(must_include.begin(), must_include.end());
  std::set<std::string> offered(available.begin(), available.end());
  if (size <= 0 || static_cast<size_t>(size) > offered.size() || required.size() > static_cast<size_t>(size)) {
    *error = "allocation_size " + std::to_string(size) + " cannot be met from " + std::to_string(offered.size()) +
             " available IDs with " + std::to_string(required.size()) + " required";
    return false;
  }
  // Free units per GPU position, in unit order (IDs sort by unit within a GPU only by number).
  std::vector<std::vector<std::string>> free(catalog.gpus().size());
  for (const std::string& id : offered) {
    const int p = catalog.PositionOfUnit(id, kind);
    if (p < 0) {
      *error = "unknown device ID '" + id + "'";
      return false;
    }
    if (!required.contains(id)) free[p].push_back(id);
  }
  std::vector<int> required_on(catalog.gpus().size(), 0);
  for (const std::string& id : required) {
    const int p = catalog.PositionOfUnit(id, kind);
    if (p < 0 || !offered.contains(id)) {
      *error = "must_include ID '" + id + "' is not one of the available IDs";
      return false;
    }
    required_on[p] += 1;
    chosen->push_back(id);
  }
  for (auto& ids : free) {
    std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
      return ParseUnitId(a)->index < ParseUnitId(b)->index;
    });
  }
  int missing = size - static_cast<int>(required.size());
  // The GPUs that may take units: those of the required IDs when there are any (a container's
  // units stay together), otherwise every GPU.
  std::vector<size_t> order;
  for (size_t p = 0; p < free.size(); ++p) {
    if (required.empty() || required_on[p] > 0) order.push_back(p);
  }
  // Best fit: the GPU whose free units exceed the need by the least.
  int best = -1;
  for (size_t p : order) {
    const int n = static_cast<int>(free[p].size());
    if (n >= missing && (best < 0 || n < static_cast<int>(free[best].size()))) best = static_cast<int>(p);
  }
  if (best >= 0) {
    chosen->insert(chosen->end(), free[best].begin(), free[best].begin() + missing);
    return true;
  }
  // Spread: the fullest GPUs first, the allowed ones before the rest.
  for (size_t p = 0; p < free.size(); ++p) {
    if (std::find(order.begin(), order.end(), p) == order.end()) order.push_back(p);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool a_required = required_on[a] > 0, b_required = required_on[b] > 0;
    if (a_required != b_required) return a_required;
    return free[a].size() > free[b].size();
  });
  for (size_t p : order) {
    const int take = std::min(missing, static_cast<int>(free[p].size()));
    chosen->insert(chosen->end(), free[p].begin(), free[p].begin() + take);
    missing -= take;
    if (missing == 0) break;
  }
  return true;
}

}  // namespace gpuslice::deviceplugin
