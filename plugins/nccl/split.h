// SPDX-License-Identifier: Apache-2.0
// Subgroups of the nccl backend: the bookkeeping of a round of subgroup creation
// (ProcessGroup::newGroup or split; Backend::prepareSplit on every rank of the parent),
// device-independent and unit-tested without a GPU.
//
// When a subgroup's communicator comes from ncclCommSplit: eagerly, in the parent
// backend's prepareSplit(), when every rank of the parent has a live communicator on its
// current CUDA device (created by eager_init or by an earlier op) and it is the same
// communicator on all of them (their ids, Communicator::id(), are equal), as c10d splits
// in new_group when the parent has a communicator bound to a device. Otherwise no rank
// splits, and the subgroup's members create a fresh communicator through the subgroup's
// own store, on first use (or in the factory with eager_init), as any group does.
//
// Why an agreement: ncclCommSplit is collective over every rank of the parent
// communicator, so a rank that split while a peer went on to ncclCommInitRank would wait
// for it until the timeout. Whether a rank has a communicator is local (an op may have
// created it, or failed), so each rank votes through the parent backend's store and all
// apply one rule to the same votes: all split, or none does.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

#include "commhost/sdk/backend.h"
#include "commhost/sdk/plugin.h"

namespace commhost::nccl_backend {

// The store key of a round's votes, under the parent backend's private store.
std::string splitKey(const std::string& round);

// Each rank votes with the id of its parent communicator on its current device
// (Communicator::id(): its unique-id key, alike on every rank of that communicator) when
// it has a live one (created, neither aborted nor failed), else "".
//
// The id of the communicator a round makes for the members of `color`: alike on each of
// them, apart from every other communicator of the subgroup's backend (whose fresh ones
// are named by their unique-id keys), so a split of the subgroup votes with it in turn.
std::string splitChildId(const std::string& round, int color);

// The rule: the communicator every vote names, or "" (create fresh) when any rank has
// none or the ranks name different ones (e.g. another current device).
std::string agreedParent(const std::vector<std::string>& votes);

// Publishes `vote` and reads every rank's (exchangeAll through `parent.store`, under
// splitKey(round)), then applies agreedParent(). An empty vote is published and "" is
// returned at once (the rule's answer whatever the others vote), so a rank whose nccl
// backend is missing (no GPU there: it never votes) delays nobody, since then no rank
// can hold a communicator of the whole group. A TimeoutError names the ranks that never
// voted: they did not call newGroup/split (`op`), members or not.
std::string agreeOnSplit(const BackendContext& parent, const std::string& round, const char* op,
                         const std::string& vote);

// What this rank passes to ncclCommSplit in a round that splits: its subgroup's color
// and, as the key, its rank in the subgroup (so NCCL orders the new communicator as the
// host orders the group); NCCL_SPLIT_NOCOLOR and 0 for a rank in no subgroup. Throws
// InvalidArgument for a request whose color, rank and members do not fit together.
struct SplitCall {
  int color = NCCL_SPLIT_NOCOLOR;
  int key = 0;
};
SplitCall splitCall(const SplitRequest& request, const ErrorContext& where);

// "" when the communicator ncclCommSplit made has the rank and size the subgroup gives
// this rank; else what differs.
std::string splitMismatch(const SplitRequest& request, int ncclRank, int ncclSize);

}  // namespace commhost::nccl_backend
