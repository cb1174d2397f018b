// kiln::optim: optimisers (SGD, Adam, AdamW, RMSprop, Adagrad) and learning-rate schedulers, with
// torch 2.13's update rules, defaults, errors and state-dict layout. Include this one header.
#pragma once

#include "kiln/optim/lr_scheduler.h"
#include "kiln/optim/optimizer.h"
#include "kiln/optim/optimizers.h"
#include "kiln/optim/value.h"
