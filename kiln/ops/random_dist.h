// The samplers kiln.distributions stands on, with torch's names: gamma draws with their
// reparameterisation derivative (torch._standard_gamma, _standard_gamma_grad), Dirichlet draws
// (torch._sample_dirichlet), Poisson draws (torch.poisson) and normal draws with tensor parameters
// (torch.normal(mean, std)). float32 and float64, as torch's CPU kernels.
#pragma once

#include "kiln/core/tensor.h"

namespace kiln {

class Generator;

// One Gamma(alpha, 1) draw per element; differentiable in alpha (implicit reparameterisation).
Tensor standard_gamma(const Tensor& alpha, Generator* g = nullptr);
// d x / d alpha of a draw x ~ Gamma(alpha, 1) with its CDF value held fixed.
Tensor standard_gamma_grad(const Tensor& alpha, const Tensor& x);
// One Dirichlet(alpha) draw per row of the last dim (gamma draws, normalised); differentiable.
Tensor sample_dirichlet(const Tensor& alpha, Generator* g = nullptr);
// One Poisson(rate) draw per element (float, as the rate); its gradient is zero, as torch's.
Tensor poisson(const Tensor& rate, Generator* g = nullptr);
// mean + std * N(0, 1), broadcast; torch gives mean and std zero gradients, and so does kiln.
Tensor normal(const Tensor& mean, const Tensor& std, Generator* g = nullptr);

}  // namespace kiln
