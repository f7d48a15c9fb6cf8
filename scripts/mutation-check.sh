#!/usr/bin/env bash
# Does the suite notice when gpuslice stops doing what it promises? Copies the tree to a scratch
# directory, applies one deliberate sabotage at a time to the copy (a small, named edit of one
# file), rebuilds, runs the tests that should notice, and reports which of them failed — the
# tests that "catch" the sabotage. Every sabotage must be caught by at least one test.
# Not part of CI: it rebuilds once per sabotage and runs timing-sensitive tests; expect an hour
# for the whole list on 2 cores (the recorded runs in docs/results/ say what was run).
#
#   scripts/mutation-check.sh [--list] [--dry-run] [--jobs N] [--scratch DIR] [--no-baseline]
#                             [--tests REGEX] [NAME...]
#
#   NAME...        only these sabotages (default: all; --list shows them)
#   --dry-run      only check that each edit still applies to the code, and show it (no build)
#   --scratch DIR  where the copy and its build go (default: $TMPDIR/gpuslice-mutation; kept, so
#                  that a second run rebuilds little)
#   --no-baseline  skip the run of the same tests on the unsabotaged copy (a test that fails
#                  there proves nothing when it fails under a sabotage)
#   --tests REGEX  run these tests (a ctest -R regex) for every sabotage instead of its own list:
#                  a quicker check that one test notices
#
# Exit status: 0 when every sabotage selected was applied and caught; 1 otherwise (a sabotage
# whose pattern no longer matches the code is reported as NOT APPLIED: update its edit here).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${TMPDIR:-/tmp}/gpuslice-mutation
jobs=2
baseline=1
list=0
dry_run=0
only_tests=
selected=()
while (($#)); do
  case $1 in
    --list) list=1 ;;
    --dry-run) dry_run=1 ;;
    --jobs) jobs=$2; shift ;;
    --scratch) scratch=$2; shift ;;
    --no-baseline) baseline=0 ;;
    --tests) only_tests=$2; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "mutation-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) selected+=("$1") ;;
  esac
  shift
done

# ---------------------------------------------------------------------------------------------
# The sabotages. Each: a name, the file it edits, a perl substitution applied to the whole file
# (perl -0pe: ^ and $ with /m match lines), the ctest regex of the tests that should catch it,
# and what it breaks. The edit must change the file, or the sabotage is reported NOT APPLIED.
names=() files=() edits=() tests=() whys=()
# A regex written `^(Suite|...)` also matches the suites' parameterized instances, whose names
# carry their instantiation's prefix (EveryFamily/ShimMemoryQuotaFamilyTest.X/alloc).
# Each is kept as its list of alternatives (A|B|C); tests_regex makes the ctest regex of one or
# several such lists: CMake's regular expressions allow only a few groups, so the union of every
# sabotage's tests must be one group, not one group per sabotage.
sabotage() {
  local regex=$4
  regex=${regex#'^'}
  [[ $regex == '('*')' ]] && regex=${regex:1:${#regex}-2}
  names+=("$1"); files+=("$2"); edits+=("$3"); tests+=("$regex"); whys+=("$5")
}
tests_regex() { printf '(^|/)(%s)' "$(printf '%s\n' "$@" | tr '|' '\n' | sort -u | paste -sd'|')"; }

# Scheduler (broker/grant_policy.cc, broker/compute_gate.cc, shim/launch_tracker.cc,
# shim/hooks_launch.cc): each rule of docs/scheduling.md broken on its own.
sabotage gating-off shim/hooks_launch.cc \
  's/^(  LaunchTracker\* tracker = state->TrackerForLaunch\(stream, per_thread, &entry\.target\);)$/  return call();  \/\/ SABOTAGE\n$1/m' \
  '^(Sched|ShimProcAddressRuleLaunchTest)' \
  'launches never wait for the tenant'"'"'s grant: no compute scheduling at all'
sabotage weights-ignored broker/grant_policy.cc \
  's/return request \? std::min<uint32_t>\(request, 100\) : kDefaultRequestPct;/return kDefaultRequestPct;  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'every tenant has the default weight, whatever GPUSLICE_COMPUTE_REQUEST says'
sabotage limits-ignored broker/grant_policy.cc \
  's/return limit \? std::min<uint32_t>\(limit, 100\) : 100;/return 100;  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy|ShimProcAddressRuleLaunchTest)' \
  'GPUSLICE_COMPUTE_LIMIT caps nothing'
sabotage idle-between-launches broker/grant_policy.cc \
  's/if \(inflight == 0 && Elapsed\(st\.idle_since_ns\.load\(\), now\) < grace\) between = true;/\/\/ SABOTAGE: no grace/' \
  '^(Sched|GrantPolicy)' \
  'an empty queue between two kernels of a synchronous launcher counts as idleness'
sabotage lease-ignored broker/grant_policy.cc \
  's/if \(inflight != 0 && Fresh\(p, st\.heartbeat_ns\.load\(\), now\)\) \{/if (inflight != 0) {  \/\/ SABOTAGE: no lease/' \
  '^(Sched|GrantPolicy)' \
  'a stopped holder keeps the grant for as long as it is stopped'
sabotage dead-waiters-count broker/grant_policy.cc \
  's/if \(Fresh\(p, At\(p\.sched, gpu_index_\)\.waiting_ns\.load\(\), now\) && Live\(slot\)\) \+\+counts\[t->value\(\)\];/if (At(p.sched, gpu_index_).waiting_ns.load() != 0) ++counts[t->value()];  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a waiter that died or was stopped keeps counting'
sabotage no-budget shim/launch_tracker.cc \
  's/bounded_\.store\(others\);/bounded_.store(false);  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a holder keeps its whole backlog queued while others share the GPU'
sabotage lane-busy-unpublished shim/launch_tracker.cc \
  's/return entry->lane_was_idle \? published_->inflight\.fetch_add\(1\) : 1;/return 1;  \/\/ SABOTAGE/; s/if \(lane->Remove\(1\) == 0\) published_->inflight\.fetch_sub\(1\);/lane->Remove(1);  \/\/ SABOTAGE/; s/if \(lane->Remove\(1\) == 0 && AdjustInflight\(static_cast<uint32_t>\(-1\)\)\) WentIdle\(MonotonicNanos\(\)\);/lane->Remove(1);  \/\/ SABOTAGE/; s/uint32_t LaunchTracker::LaneWentIdle\(\) \{ return static_cast<uint32_t>\(-1\); \}/uint32_t LaunchTracker::LaneWentIdle() { return 0; }  \/\/ SABOTAGE/' \
  '^(Sched|ShimComputeThreads)' \
  'launching threads are not counted in their process'"'"'s published in-flight word: hand-overs see only the extra launches its monitor publishes'
sabotage latency-bucket-ignored broker/compute_gate.cc \
  's/if \(!PriorityBucketHasTime\(now\)\) return false;/\/\/ SABOTAGE: the bucket is not looked at/' \
  '^(Sched|GrantPolicy)' \
  'a latency-class launch passes the grant whatever its bucket holds'
sabotage latency-class-waits broker/compute_gate.cc \
  's/if \(class_ != ComputeClass::kLatency\) return false;/return false;  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a latency-class launch never passes the grant: it waits for its turn as a standard one does'
sabotage reentry-against-holder-clock broker/grant_policy.cc \
  's/const uint64_t system = ReentryVtime\(t, counts, now\);/const uint64_t system = SystemVtime(now);  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a tenant back from idle re-enters two quanta behind the holder'"'"'s clock alone, ahead of a waiting trainer when the holder'"'"'s request is small'
sabotage over-limit-lag-kept broker/grant_policy.cc \
  's/\(before == 0 \|\| RefillNs\(l, now\) != 0\)/(before == 0 \/* SABOTAGE *\/)/' \
  '^(Sched|GrantPolicy)' \
  'a tenant waiting over its limit keeps falling behind the system, and is granted first whenever its bucket refills'
sabotage owed-at-holder-weight broker/grant_policy.cc \
  's/std::max\(WeightOf\(h\), WeightOf\(w\)\)/WeightOf(h) \/* SABOTAGE *\//' \
  '^(Sched|GrantPolicy)' \
  'a waiter is owed the GPU only a quantum at the holder'"'"'s weight behind it: a small-request holder keeps the GPU from a service back from idle'
sabotage owed-at-larger-weight-always broker/grant_policy.cc \
  's/w\.back_from_idle\.load\(\) \?/true \/* SABOTAGE *\/ ?/' \
  '^(Sched|GrantPolicy)' \
  'every waiter, busy or back from idle, is owed the GPU a quantum behind at the larger of its and the holder'"'"'s weight: a small-request holder'"'"'s grants are cut short'
sabotage owed-over-limit broker/grant_policy.cc \
  's/if \(w\.waiting\.load\(\) == 0 \|\| RefillNs\(w, now\) != 0\) continue;/if (w.waiting.load() == 0) continue;  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a holder yields to a waiter over its limit, which cannot take the grant: the GPU goes to nobody'
sabotage over-limit-yield-uncharged broker/grant_policy.cc \
  's/if \(w\.waiting\.load\(\) == 0 \|\| RefillNs\(w, now\) != 0\) continue;/if (w.waiting.load() == 0) continue;  \/\/ SABOTAGE/; s/if \(activity == Activity::kDraining && next != field\) \{/if (activity == Activity::kDraining \&\& next != 0 \&\& next != field) {  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'as before the fix: a holder yields to a waiter over its limit, the GPU goes to nobody, and the holder'"'"'s queued kernels run on charged to no one'
sabotage yield-drains broker/grant_policy.cc \
  's/case CloseReason::kYield: return true;/case CloseReason::kYield: return false;  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a waiter owed the GPU waits for the holder'"'"'s whole queue to drain'
sabotage limited-yield-drains broker/grant_policy.cc \
  's/case CloseReason::kYield: return true;/case CloseReason::kYield: return !limited;  \/\/ SABOTAGE/' \
  '^(SchedLatencyTest|GrantPolicyTest)' \
  'a waiter owed the GPU waits for a limited holder'"'"'s whole queue to drain'
sabotage classes-ignored broker/grant_policy.cc \
  's/return value <= static_cast<uint32_t>\(ComputeClass::kBackground\) \? static_cast<ComputeClass>\(value\)\n\s*: ComputeClass::kStandard;/return ComputeClass::kStandard;  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'GPUSLICE_COMPUTE_CLASS changes nothing in the grant decisions'
sabotage idle-charged broker/grant_policy.cc \
  's/const uint64_t used = std::min\(active - start, busy_now > at_grant \? busy_now - at_grant : 0\);/const uint64_t used = Elapsed(start, now);  \/\/ SABOTAGE/' \
  '^(Sched|GrantPolicy)' \
  'a holder is charged for the time it held the GPU idle'

# Memory accounting.
sabotage quota-ignored broker/broker.cc \
  's/^(\s*)if \(bytes > quota \|\| used > quota - bytes \|\| held > UINT64_MAX - bytes\) return false;$/$1\/\/ SABOTAGE: no quota check/m' \
  '^(BrokerLedgerTest|ShimMemoryQuota|ShimInterposition)' \
  'a reservation is granted whatever the quota'
sabotage accounting-credit-skipped shim/hooks_memory.cc \
  's/^(\s*)state->broker\(\)\.Release\(charge\.ledger, charge\.bytes\);$/$1\/\/ SABOTAGE: the free credits nothing/m' \
  '^(ShimMemoryQuota|ShimCrashTest|ShimInterposition|ShimPairsTest|ShimTeardownTest)' \
  'freeing memory does not return its charge to the tenant'
sabotage memory-info-not-narrowed shim/hooks_memory_info.cc \
  's/^  Narrow\(state, ledger, free, total\);$/  \/\/ SABOTAGE: the whole device is reported/m' \
  '^ShimMemoryInfo' \
  'cuMemGetInfo reports the device, not the tenant'"'"'s slice'

# Reclaiming a dead process's charges: one sabotage per path (broker_reclaim_paths_test.cc).
sabotage reclaim-on-allocation-off broker/broker.cc \
  's/^  ReapDeadProcesses\(\);  \/\/ what is missing may be held by processes that died$/  \/\/ SABOTAGE: no reap on a refused reservation/m' \
  '^(BrokerCrashTest|ShimCrashTest|BrokerReclaimPaths|ShimReclaimPaths)' \
  'a reservation that does not fit does not reclaim what dead processes hold'
sabotage reclaim-on-register-tenants-off broker/broker.cc \
  's/(if \(!tenant_index\) \{\n\s*)ReapDeadLocked\(segment, fd, std::nullopt\);/$1\/\/ SABOTAGE/' \
  '^(BrokerCrashTest|BrokerReclaimPaths)' \
  'a full tenant table is not cleared of dead processes when a new tenant registers'
sabotage reclaim-on-register-processes-off broker/broker.cc \
  's/(if \(!slot\) \{\n\s*)ReapDeadLocked\(segment, fd, std::nullopt\);/$1\/\/ SABOTAGE/' \
  '^(BrokerCrashTest|BrokerReclaimPaths)' \
  'a full process table is not cleared of dead processes when a process registers'
sabotage reclaim-on-new-gpu-off broker/broker.cc \
  's/(if \(!gpu\) \{\n\s*)ReapDeadLocked\(segment, fd, own\);/$1\/\/ SABOTAGE/' \
  '^(BrokerCrashTest|BrokerReclaimPaths)' \
  'a full GPU table is not cleared of dead processes'"'"' GPUs when a new GPU is opened'
sabotage reclaim-on-new-quota-off broker/broker.cc \
  's/ShareOf\(entry\) != share\) ReapDeadLocked\(segment, fd, own\);/ShareOf(entry) != share) {}  \/\/ SABOTAGE/' \
  '^(BrokerCrashTest|BrokerLedgerTest|BrokerReclaimPaths|ShimTenantTest)' \
  'a dead process pins its tenant'"'"'s old quota'
sabotage borrowing-unchecked broker/memory_requests.cc \
  's/if \(used_after <= request\) return true;/return true;  \/\/ SABOTAGE/' \
  '^(ShimMemoryRequestTest|BrokerMemoryRequestTest)' \
  'a tenant borrows memory other tenants'"'"' requests reserve'
sabotage request-held-over-borrowers broker/memory_requests.cc \
  's/if \(refuse_if_borrowed\) return Status::ResourceExhausted\(std::move\(line\)\);/(void)refuse_if_borrowed;  \/\/ SABOTAGE/' \
  '^(ShimMemoryRequestTest)' \
  'a newcomer is admitted while borrowers hold its request'
sabotage request-count-never-raised broker/memory_requests.cc \
  's/if \(before == 0 && request != 0\) count\.fetch_add\(1\);/\/\/ SABOTAGE: count never raised/' \
  '^(ShimMemoryRequestTest|BrokerMemoryRequestTest)' \
  'a GPU with requests is taken for one without: borrowing goes unchecked'
sabotage driver-cgroup-limits-off sim/sim_state.cc \
  's/if \(bytes > room\.left\) return false;/(void)room;  \/\/ SABOTAGE/' \
  '^(SimMemoryPartitioningTest|DriverLimitsHookTest)' \
  'the simulated r615 driver does not enforce per-cgroup hard limits'
sabotage reclaim-by-gpuslicectl-off broker/snapshot.cc \
  's/if \(table\.locked\(\)\) ReapDeadLocked\(segment, file->fd\.get\(\), std::nullopt\);/\/\/ SABOTAGE: no reap/' \
  '^(GpuslicectlTest|BrokerReclaimPaths)' \
  'gpuslicectl status shows dead processes'"'"' memory as held'
sabotage reclaim-on-memory-query-off shim/hooks_memory_info.cc \
  's/if \(last_reap_ns\.compare_exchange_strong\(last, now\)\) state->broker\(\)\.ReapDeadProcesses\(\);/(void)state;  \/\/ SABOTAGE/' \
  '^(ShimMemoryInfo|ShimReclaimPaths|ShimCrashTest)' \
  'cuMemGetInfo and NVML keep counting dead processes'"'"' memory'

# Table sizes (issue 22: a 16-GPU node of MIG instances is 128 GPUs).
sabotage open-gpus-first-word-only broker/checked_index.h \
  's/return process\.open_gpus\[gpu\.value\(\) \/ 64\]\.load\(order\) & OpenGpusBit\(gpu\);/return process.open_gpus[0].load(order) \& OpenGpusBit(gpu);  \/\/ SABOTAGE/' \
  '^(BrokerLedgerTest|BrokerCheckedIndexTest)' \
  'GPUs 64 to 127 are seen open or closed by the bits of GPUs 0 to 63'
sabotage ledger-init-on-new-tenant-off broker/tables.cc \
  's/^(void InitLedgersOfNewTenant\(Segment\* segment, TenantIndex tenant\) \{\n).*\n/$1  (void)segment; (void)tenant;  \/\/ SABOTAGE\n/m' \
  '^(BrokerLedgerTest)' \
  'a tenant that arrives after a GPU finds its ledger lock there uninitialised and is refused'

# Deployment shapes (issue 22): leavers mid-wait, two GPUs, bounded locks, pitched rows.
sabotage closing-kept-for-gone-waiter broker/grant_policy.cc \
  's/    if \(gpu_->closing\.exchange\(0\) != 0\) changed = true;\n    gpu_->closed_at_ns\.store\(0\);\n    return changed;/    return changed;  \/\/ SABOTAGE/' \
  '^(GrantPolicyTest|SchedDeploymentShapesTest)' \
  'a gate closed for a waiter that then left stays closed: the holder waits for its own grant'
sabotage context-asked-per-launch shim/current_context.h \
  's/if \(m\.epoch == epoch_\.load\(std::memory_order_acquire\) && m\.epoch != 0\) return m\.context;/\/\/ SABOTAGE: the driver is asked at every launch/' \
  '^(ShimLaunchCallsTest)' \
  'the current context is asked of the driver at every launch: a driver call per launch, alone too'
sabotage marker-every-launch shim/launch_tracker.cc \
  's/marker_every_\.store\(std::max<uint32_t>\(1, budget \/ 2\), std::memory_order_relaxed\);/marker_every_.store(1, std::memory_order_relaxed);  \/\/ SABOTAGE/' \
  '^(ShimLaunchCallsTest)' \
  'a marker (an event) is recorded behind every launch while another tenant shares the GPU'
sabotage first-gpu-gates-all shim/launch_routing.cc \
  's/      if \(s\.tracker && s\.current == current && s\.handle == handle\) \{/      if (s.tracker) {  \/\/ SABOTAGE/' \
  '^(SchedDeploymentShapesTest)' \
  'a process is gated on the first GPU it launched on for every GPU'
sabotage sched-lock-unbounded broker/grant_policy.cc \
  's/uint64_t SchedLockTimeoutNs\(\) \{ return std::min\(kSchedLockBoundNs, LockTimeoutNs\(\)\); \}/uint64_t SchedLockTimeoutNs() { return kWaitForever; }  \/\/ SABOTAGE/' \
  '^(SchedDeploymentShapesTest)' \
  'a process stopped inside a grant decision freezes every other tenant and newcomer'
sabotage pitch-charged-by-width shim/hooks_memory.cc \
  's/const uint64_t actual = ChargeFor\(SaturatingProduct\(\*pPitch, Height\)\);/const uint64_t actual = ChargeFor(SaturatingProduct(WidthInBytes, Height));  \/\/ SABOTAGE/' \
  '^(ShimMemoryQuotaTest|ShimMemoryQuotaFamilyTest)' \
  'pitched allocations are charged by their width, not their padded pitch'
sabotage latency-work-charged-twice broker/grant_policy.cc \
  's/  if \(holder\) gpu_->overlap_ns\.fetch_add/  if (false \/* SABOTAGE *\/) gpu_->overlap_ns.fetch_add/' \
  '^(GrantPolicyTest|SchedDeploymentShapesTest)' \
  'latency work beside the holder is charged to both'

# Crash and fork safety.
sabotage torn-ledger-not-repaired broker/ledger.cc \
  's/(ledger_repairs\.fetch_add\(1, std::memory_order_relaxed\);\n)\s*At\(\*segment, ledger\)\n\s*\.used\.store\(SumRegisteredCharges\(\*segment, ledger\.tenant\(\), ledger\.gpu\(\)\), std::memory_order_release\);/$1    \/\/ SABOTAGE: the total is not recomputed/' \
  '^(BrokerCrashTest|ShimCrashTest)' \
  'a ledger left mid-update by a process that died holding its mutex keeps a wrong total'
sabotage fork-child-keeps-parent-registration shim/shim_state.cc \
  's/if \(parent\) parent->ForgetAfterFork\(\);/(void)parent;  \/\/ SABOTAGE/' \
  '^(ShimForkTest|ShimCrashTest)' \
  'a forked child goes on as its parent'"'"'s registration instead of registering afresh'

# Failing closed, and interposition.
sabotage fork-locks-not-held shim/shim_state.cc \
  's/(void BeforeFork\(\) NO_THREAD_SAFETY_ANALYSIS \{\n).*?(\n\}\n\nvoid ReleaseForkLocks\(\) NO_THREAD_SAFETY_ANALYSIS \{\n).*?(\n\})/$1  \/\/ SABOTAGE: nothing held over the fork$2  \/\/ SABOTAGE$3/s' \
  '^(ShimForkTest)' \
  'a child forked while another thread makes the first CUDA call inherits the attach'"'"'s lock held'
sabotage fork-handlers-registered-at-first-call shim/shim_state.cc \
  's/__attribute__\(\(constructor\)\) void RegisterForkHandlers\(\)/void RegisterForkHandlers() \/* SABOTAGE: not at load *\//; s/(ShimState\* ShimState::GetSlow\(\) \{\n)/$1  static const bool registered = (RegisterForkHandlers(), true);  \/\/ SABOTAGE\n  (void)registered;\n/' \
  '^(ShimForkTest)' \
  'the fork handlers are registered at the first CUDA call: a fork() already under way misses them'
sabotage fail-open-config shim/shim_state.cc \
  's/if \(!valid\) return nullptr;  \/\/ already reported/if (!valid) state->options_ = ShimOptions();  \/\/ SABOTAGE: bad settings mean the defaults/' \
  '^(ShimBadSetting|ShimConfigTest)' \
  'a bad or unknown GPUSLICE_* variable runs the process with the defaults (no quota)'
sabotage proc-address-substitution-off shim/hooks_init.cc \
  's/\*pfn = SubstituteHook\(symbol, cudaVersion, flags, \*pfn\);/(void)SubstituteHook;  \/\/ SABOTAGE/g' \
  '^(ShimInterposition|ShimStreamOrderedInterposition|ShimProcAddressRule)' \
  'cuGetProcAddress hands out the driver'"'"'s functions, not the shim'"'"'s hooks'
sabotage proc-address-version-rule-off shim/real_driver.cc \
  's/^(  \/\/ By the version rule: )/  return found;  \/\/ SABOTAGE\n$1/m' \
  '^(ShimInterposition|ShimProcAddressRule)' \
  'an answer of cuGetProcAddress that is not an export (an internal entry point) is not replaced'
# The simulator mode the previous one is tested with.
sabotage sim-internal-entry-points-off sim/driver/api_proc_address.cc \
  's/mode == gpuslice::sim::ProcAddressMode::kInternal\)/false \/* SABOTAGE *\/)/' \
  '^(SimInternalEntryPoints|ShimProcAddressRule)' \
  'GPUSLICE_SIM_PROC_ADDRESS=internal hands out the exports after all'

# Placement (place/policy.h): our policies' terms, each switched off.
sabotage place-dead-holes-ignored place/policy.h \
  's/kDeadHoleWeight = 3\.0;/kDeadHoleWeight = 0.0;  \/\/ SABOTAGE/' \
  '^(PlacePolicy|PlaceExperiment)' \
  'FGD-BF-H leaves dead holes as FGD-BF-C does'
sabotage place-cpu-term-off place/policy.h \
  's/kCpuStarvedWeight = 1\.0;/kCpuStarvedWeight = 0.0;  \/\/ SABOTAGE/' \
  '^(PlacePolicy|PlaceExperiment)' \
  'FGD-BF-C lets a node'"'"'s CPU run down while its GPUs are free'
sabotage place-homes-ignored place/policy.h \
  's/kHomeWeight = 1\.0;/kHomeWeight = 0.0;  \/\/ SABOTAGE/' \
  '^(PlaceHomes)' \
  'FGD-BF-G takes the last home of a big pod to come'

# Locks (common/thread_annotations.h): Clang's analysis, not a run, notices a lock left out.
sabotage pool-lock-removed shim/memory_devices.cc \
  's/(void ShimState::NotePool\(CUmemoryPool pool, CUdevice device\) \{\n)  MutexLock lock\(&pools_mutex_\);\n/$1  \/\/ SABOTAGE: no lock\n/' \
  '^(ThreadSafetyCheck)' \
  'the shim records a memory pool without taking the lock that guards the pool list'

# The ctest regex of sabotage i's tests (--tests: the one given, as it is).
regex_of() { if [[ -n $only_tests ]]; then printf '%s' "$only_tests"; else tests_regex "${tests[$1]}"; fi; }
if ((list)); then
  for i in "${!names[@]}"; do printf '%-34s %-28s %s\n' "${names[$i]}" "${files[$i]}" "${whys[$i]}"; done
  exit 0
fi
chosen=()
if ((${#selected[@]})); then
  for want in "${selected[@]}"; do
    found=0
    for i in "${!names[@]}"; do [[ ${names[$i]} == "$want" ]] && { chosen+=("$i"); found=1; }; done
    ((found)) || { echo "mutation-check: no sabotage named $want (see --list)" >&2; exit 2; }
  done
else
  chosen=("${!names[@]}")
fi

if ((dry_run)); then
  status=0
  for i in "${chosen[@]}"; do
    if perl -0pe "${edits[$i]}" "$root/${files[$i]}" | diff -u "$root/${files[$i]}" - >"${TMPDIR:-/tmp}/mutation-dry.diff"; then
      printf '%-34s NOT APPLIED: its pattern no longer matches %s\n' "${names[$i]}" "${files[$i]}"
      status=1
    else
      printf '%-34s applies to %s:\n' "${names[$i]}" "${files[$i]}"
      grep '^[-+][^-+]' "${TMPDIR:-/tmp}/mutation-dry.diff" | sed 's/^/    /'
    fi
  done
  rm -f "${TMPDIR:-/tmp}/mutation-dry.diff"
  exit $status
fi

# ---------------------------------------------------------------------------------------------
copy=$scratch/gpuslice
build=$copy/build
log=$scratch/log
mkdir -p "$copy" "$log"
say() { printf '%s\n' "$*" | tee -a "$log/summary.txt"; }
: >"$log/summary.txt"

# The working tree as it is (committed or not), without what git ignores. Into a staging
# directory first, then into the copy only the files whose content differs, with the time of the
# copy: a file restored after the previous run's last sabotage has an older time than the objects
# built from the sabotaged file, and copied with its own time it would not be rebuilt.
stage=$scratch/stage
rm -rf "$stage"
mkdir -p "$stage"
git -C "$root" ls-files -z --cached --others --exclude-standard |
  (cd "$root" && tar --null -T - -cf -) | tar -C "$stage" -xf -
python3 - "$stage" "$copy" <<'PY'
import filecmp, os, shutil, sys
stage, copy = sys.argv[1:]
for top, _, files in os.walk(stage):
    for name in files:
        src = os.path.join(top, name)
        dst = os.path.join(copy, os.path.relpath(src, stage))
        if os.path.islink(src):
            if not os.path.islink(dst) or os.readlink(dst) != os.readlink(src):
                if os.path.lexists(dst):
                    os.remove(dst)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.symlink(os.readlink(src), dst)
        elif os.path.islink(dst) or not os.path.exists(dst) or not filecmp.cmp(src, dst, shallow=False):
            if os.path.lexists(dst):
                os.remove(dst)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
PY
rm -rf "$stage"

# ccache: the copy's paths are not the tree's, so hash neither the directory nor absolute paths.
export CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=1
# The test programs share a precompiled header (tests/CMakeLists.txt): ccache caches them only so.
export CCACHE_SLOPPINESS=pch_defines,time_macros
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$copy" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$log/configure.txt"

build_all() { nice -n 15 cmake --build "$build" -j"$jobs" >"$1" 2>&1; }
# Rebuilds what the tests of `regex` run: their programs (whose dependencies bring the shim, the
# simulated driver and the tools), not every test program of the tree.
build_for() {
  local regex=$1 out=$2 targets
  # A check run from scripts/ (ThreadSafetyCheck) builds nothing of its own.
  targets=$( (cd "$build" && ctest -N -R "$regex" --show-only=json-v1) | python3 -c '
import json, os, sys
tests = json.load(sys.stdin)["tests"]
scripts = os.path.join(sys.argv[1], "scripts") + os.sep
print(" ".join(sorted({os.path.basename(t["command"][0]) for t in tests
                       if t.get("command") and not t["command"][0].startswith(scripts)})))' "$copy")
  nice -n 15 cmake --build "$build" -j"$jobs" --target gpuslice $targets >"$out" 2>&1
}
# The tests of `regex` that failed, one per line (ctest's "The following tests FAILED" list).
run_tests() {
  local regex=$1 out=$2
  (cd "$build" && nice -n 15 ctest -R "$regex" -j"$jobs" --timeout 300 >"$out" 2>&1) || true
  # "  361 - Suite.Name/Param  # GetParam() = ... (Failed)": the name is the first word.
  sed -n '/The following tests FAILED:/,$p' "$out" | sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+).*$/\1/p'
}

if [[ -n $only_tests ]]; then
  union=$only_tests
else
  union=$(tests_regex $(for i in "${chosen[@]}"; do printf '%s\n' "${tests[$i]}"; done))
fi
say "mutation check of $root ($(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ', with uncommitted changes')), $(date -u '+%Y-%m-%d %H:%M UTC')"
# Everything once (ctest must know every test program), then only what the tests run.
if ! build_all "$log/build-baseline.txt"; then
  say "the unsabotaged copy does not build: see $log/build-baseline.txt"
  exit 1
fi

# A regex that selected nothing (or that ctest could not compile) stops the check: every test
# would seem to pass.
require_tests_ran() {
  grep -qE 'tests passed, [0-9]+ tests failed out of [1-9]' "$1" && return 0
  say "ctest ran no test for $2 (see $1): fix its regex in scripts/mutation-check.sh"
  exit 1
}

declare -A flaky=()
if ((baseline)); then
  while read -r t; do [[ -n $t ]] && flaky[$t]=1; done < <(run_tests "$union" "$log/tests-baseline.txt")
  require_tests_ran "$log/tests-baseline.txt" "the baseline"
  if ((${#flaky[@]})); then
    say "baseline: these tests fail without any sabotage and are not counted as catching one: ${!flaky[*]}"
  else
    say "baseline: every selected test passes on the unsabotaged copy"
  fi
fi

missed=0
for i in "${chosen[@]}"; do
  name=${names[$i]} file=${files[$i]}
  pristine=$root/$file target=$copy/$file
  perl -0pe "${edits[$i]}" "$pristine" >"$target.sabotaged"
  if cmp -s "$pristine" "$target.sabotaged"; then
    rm -f "$target.sabotaged"
    say "$(printf '%-34s NOT APPLIED: its pattern no longer matches %s; update it in scripts/mutation-check.sh' "$name" "$file")"
    missed=1
    continue
  fi
  mv "$target.sabotaged" "$target"
  diff -u "$pristine" "$target" >"$log/$name.diff" || true
  if ! build_for "$(regex_of "$i")" "$log/$name-build.txt"; then
    say "$(printf '%-34s BUILD FAILED (see %s)' "$name" "$log/$name-build.txt")"
    missed=1
  else
    caught=()
    while read -r t; do [[ -n $t && -z ${flaky[$t]:-} ]] && caught+=("$t"); done \
      < <(run_tests "$(regex_of "$i")" "$log/$name-tests.txt")
    require_tests_ran "$log/$name-tests.txt" "$name"
    ran=$(sed -nE 's/.*tests passed, [0-9]+ tests failed out of ([0-9]+).*/\1/p' "$log/$name-tests.txt")
    if ((${#caught[@]})); then
      say "$(printf '%-34s CAUGHT by %d of %s tests run: %s' "$name" "${#caught[@]}" "${ran:-?}" "${caught[*]}")"
    else
      say "$(printf '%-34s MISSED: all %s tests of %s pass' "$name" "${ran:-?}" "$(regex_of "$i")")"
      missed=1
    fi
  fi
  cp -p "$pristine" "$target"
  touch "$target"  # newer than the sabotaged build: the next build restores it
done
say "logs: $log"
exit $missed
