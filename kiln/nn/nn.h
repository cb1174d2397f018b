// kiln::nn umbrella header.
#pragma once

#include "kiln/nn/adaptive.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/conv_layers.h"
#include "kiln/nn/float8.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/layers_extra.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/loss_modules.h"
#include "kiln/nn/module.h"
#include "kiln/nn/moe.h"
#include "kiln/nn/norm_layers.h"
#include "kiln/nn/rnn.h"
#include "kiln/nn/transformer.h"
#include "kiln/nn/utils.h"
