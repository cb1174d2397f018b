// kiln::nn::init — torch.nn.init: in-place initialisers (run without recording gradients).
#pragma once

#include <string>
#include <utility>

#include "kiln/core/generator.h"
#include "kiln/ops/ops.h"

namespace kiln::nn::init {

// torch.nn.init.calculate_gain(nonlinearity, param)
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = std::nullopt);
// (fan_in, fan_out) of a weight tensor (dims >= 2).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

const Tensor& uniform_(const Tensor& t, double a = 0, double b = 1, Generator* g = nullptr);
const Tensor& normal_(const Tensor& t, double mean = 0, double std = 1, Generator* g = nullptr);
const Tensor& constant_(const Tensor& t, const Scalar& v);
const Tensor& zeros_(const Tensor& t);
const Tensor& ones_(const Tensor& t);
const Tensor& eye_(const Tensor& t);
const Tensor& xavier_uniform_(const Tensor& t, double gain = 1.0, Generator* g = nullptr);
const Tensor& xavier_normal_(const Tensor& t, double gain = 1.0, Generator* g = nullptr);
// mode: "fan_in" | "fan_out"; nonlinearity as calculate_gain.
const Tensor& kaiming_uniform_(const Tensor& t, double a = 0, const std::string& mode = "fan_in",
                               const std::string& nonlinearity = "leaky_relu", Generator* g = nullptr);
const Tensor& kaiming_normal_(const Tensor& t, double a = 0, const std::string& mode = "fan_in",
                              const std::string& nonlinearity = "leaky_relu", Generator* g = nullptr);
const Tensor& trunc_normal_(const Tensor& t, double mean = 0, double std = 1, double a = -2, double b = 2,
                            Generator* g = nullptr);
const Tensor& orthogonal_(const Tensor& t, double gain = 1.0, Generator* g = nullptr);

}  // namespace kiln::nn::init
