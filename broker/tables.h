// Claiming entries of the GPU, tenant and process tables, and reaping dead processes. Every
// function here runs with the header's table mutex held (lock order: table, then ledgers).
//
// An entry is claimed by writing its fields while its state is kFree and publishing it with one
// final store of its state, so a claimant killed halfway leaves a free entry, which the next
// claim simply overwrites: the table mutex needs no repair after its owner died.
//
// Every index and count read from the segment goes through broker/checked_index.h: a forged
// tenant, GPU mask or high-water mark is clamped or ignored, never used to reach past a table.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "broker/checked_index.h"
#include "broker/segment_layout.h"

namespace gpuslice::broker {

// The tenant's index, claiming a free entry for a new name; nullopt when the table is full. With
// `recycle`, a full table reuses the entry of a tenant without registered processes (reap first).
std::optional<TenantIndex> FindOrClaimTenant(Segment* segment, std::string_view name, bool recycle);

// The GPU's index (its total memory updated), claiming an entry for a new UUID; nullopt when
// full. With `recycle`, reuses the entry of a GPU no registered process has a ledger open on.
std::optional<GpuIndex> FindOrClaimGpu(Segment* segment, const uint8_t (&uuid)[16], uint64_t total_memory,
                                       bool recycle);

// Claims a free process slot for `tenant` and takes its liveness lock through fd; nullopt when full.
std::optional<ProcessSlot> ClaimProcessSlot(Segment* segment, int fd, TenantIndex tenant, int32_t pid);

// Returns every byte the slot's process has charged to its tenant's ledgers, then frees the slot.
// Safe to repeat after a reaper died halfway: each charge is zeroed with its subtraction. A ledger
// lock held by someone else for `ledger_wait_ns` leaves that charge and the slot for a later reap
// (false): a reaper holding the table lock must not wait out every stopped holder's full bound.
bool ReturnChargesAndFree(Segment* segment, ProcessSlot slot, uint64_t ledger_wait_ns);
// What a reaper waits for one ledger lock: ledger updates last microseconds.
inline constexpr uint64_t kReapLedgerWaitNs = 10'000'000;

// Frees the slots of registered processes whose liveness lock is gone (they died, in whatever
// PID namespace), returning their charges. `own_slot` is skipped: a process's own lock never
// conflicts with its own descriptor, so it would look dead. Returns how many were reaped.
int ReapDeadLocked(Segment* segment, int fd, std::optional<ProcessSlot> own_slot);

}  // namespace gpuslice::broker
