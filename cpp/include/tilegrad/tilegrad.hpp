// Umbrella header of the native C++ API.
#pragma once

#include "tilegrad/adamw.hpp"
#include "tilegrad/binary_cross_entropy_with_logits.hpp"
#include "tilegrad/binary_cross_entropy_with_logits_backward.hpp"
#include "tilegrad/embedding_dense_backward.hpp"
#include "tilegrad/flash_attention_score.hpp"
#include "tilegrad/fused_linear_cross_entropy.hpp"
#include "tilegrad/cross_entropy.hpp"
#include "tilegrad/reduction.hpp"
#include "tilegrad/add_rms_norm.hpp"
#include "tilegrad/rms_norm.hpp"
#include "tilegrad/rotary_position_embedding.hpp"
#include "tilegrad/runtime.hpp"
#include "tilegrad/silu_backward.hpp"
#include "tilegrad/swi_glu.hpp"
#include "tilegrad/status.hpp"
#include "tilegrad/tensor_view.hpp"
