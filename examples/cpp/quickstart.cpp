// The README's C++ example: build against an installed kiln with find_package(kiln).
#include <kiln/kiln.h>

#include <iostream>

int main() {
  using namespace kiln;
  manual_seed(0);
  Tensor x = randn({4, 3});                         // float32 by default
  Tensor w = arange(Scalar(0), Scalar(6), Scalar(1), kFloat32).view({3, 2});
  Tensor y = matmul(x, w) + 1.0;                    // broadcasting, scalar promotion
  Tensor p = softmax(y, /*dim=*/1);
  std::cout << p << "\n";                           // prints like torch
  std::cout << sum(p, Shape{1}) << "\n";            // rows sum to 1
  Tensor h = x.to(kBFloat16);                       // all 17 torch dtypes
  std::cout << h.dtype() << " " << h.sizes()[0] << "\n";
  try {
    matmul(x, x);                                   // bad shapes raise, never crash
  } catch (const Error& e) {
    std::cout << e.what() << "\n";
  }
  return 0;
}
