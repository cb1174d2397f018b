// torch.finfo's eps, tiny (the smallest normal) and min of kiln's floating dtypes, for C++ code that
// clamps or floors by them (python/kiln/_finfo.py is the Python side). float32's for other dtypes.
#pragma once

#include "kiln/core/dtype.h"

namespace kiln {

inline double finfo_eps(Dtype d) {
  return d == kFloat64 ? 2.220446049250313e-16 : d == kFloat16 ? 0.0009765625 : d == kBFloat16 ? 0.0078125
                                                                                                : 1.1920928955078125e-07;
}
inline double finfo_tiny(Dtype d) {
  return d == kFloat64 ? 2.2250738585072014e-308 : d == kFloat16 ? 6.103515625e-05 : 1.1754943508222875e-38;
}
inline double finfo_min(Dtype d) {
  return d == kFloat64 ? -1.7976931348623157e308 : d == kFloat16 ? -65504.0
                       : d == kBFloat16                          ? -3.3895313892515355e38
                                                                 : -3.4028234663852886e38;
}

}  // namespace kiln
