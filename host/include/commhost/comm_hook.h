// SPDX-License-Identifier: Apache-2.0
// Moved to commhost/sdk/comm_hook.h (the plugin SDK's headers live in commhost/sdk/). This
// forwarding header keeps plugins written before the split building; it goes at ABI 3.0.
#pragma once

#include "commhost/sdk/comm_hook.h"
