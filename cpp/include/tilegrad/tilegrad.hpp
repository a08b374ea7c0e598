// Umbrella header of the native C++ API.
#pragma once

#include "tilegrad/cross_entropy.hpp"
#include "tilegrad/runtime.hpp"
#include "tilegrad/silu_backward.hpp"
#include "tilegrad/status.hpp"
#include "tilegrad/tensor_view.hpp"
