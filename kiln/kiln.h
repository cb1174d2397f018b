// kiln: a small, fast deep-learning framework. Include this one header.
#pragma once

#include "kiln/autograd/autograd.h"
#include "kiln/backend/cpu/parallel.h"
#include "kiln/core/allocator.h"
#include "kiln/core/dtype.h"
#include "kiln/core/error.h"
#include "kiln/core/generator.h"
#include "kiln/core/scalar.h"
#include "kiln/core/tensor.h"
#include "kiln/dispatch/op.h"
#include "kiln/io/safetensors.h"
#include "kiln/nn/nn.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/optim/optim.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
