/* The api layer: the public prefixed API (brisk.h's allocation, tuning and
 * limit functions), the malloc family and C++ new/delete overrides, and the
 * process hooks. It builds on every layer below and nothing builds on it. */
#ifndef BRISK_API_H
#define BRISK_API_H

#include "core/fast_path.h"
#include "extra/extra.h"

#endif
