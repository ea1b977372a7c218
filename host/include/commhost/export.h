// Symbol visibility for libcommhost. Everything is hidden unless marked COMMHOST_API.
#pragma once

#if defined(COMMHOST_BUILDING_HOST)
#define COMMHOST_API __attribute__((visibility("default")))
#else
#define COMMHOST_API
#endif
