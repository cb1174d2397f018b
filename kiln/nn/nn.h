// kiln::nn umbrella header.
#pragma once

#include "kiln/nn/functional.h"
#include "kiln/nn/init.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/module.h"
#include "kiln/nn/utils.h"
