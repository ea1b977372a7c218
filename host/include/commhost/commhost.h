// SPDX-License-Identifier: Apache-2.0
// Everything an application or plugin needs.
#pragma once

#include "commhost/backend.h"
#include "commhost/backend_sdk.h"
#include "commhost/capabilities.h"
#include "commhost/comm_hook.h"
#include "commhost/config.h"
#include "commhost/dispatcher.h"
#include "commhost/errors.h"
#include "commhost/future.h"
#include "commhost/logging.h"
#include "commhost/option_schema.h"
#include "commhost/options.h"
#include "commhost/plugin.h"
#include "commhost/process_group.h"
#include "commhost/reducer.h"
#include "commhost/registry.h"
#include "commhost/store.h"
#include "commhost/tensor.h"
#include "commhost/types.h"
#include "commhost/version.h"
#include "commhost/work.h"
