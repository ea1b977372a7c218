// SPDX-License-Identifier: Apache-2.0
// Symbol visibility for libcommhost. Everything is hidden unless marked COMMHOST_API.
// The mark means default visibility on both sides (the library and its users), so the
// type info of exceptions and polymorphic classes is shared across shared objects and a
// plugin's commhost::Error is caught by the host's handlers, as ELF requires.
#pragma once

#define COMMHOST_API __attribute__((visibility("default")))
