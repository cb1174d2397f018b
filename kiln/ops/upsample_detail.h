// What the upsampling ops' metas (kiln/ops/upsample.cpp) and their CPU kernels
// (kiln/backend/cpu/upsample.cpp) share: the scales in the attributes and the output shape.
#pragma once

#include <string>

#include "kiln/ops/nn_detail.h"
#include "kiln/ops/nn_ops.h"

namespace kiln::upsample_detail {

using namespace nn_detail;

// attrs: a scale is a double, or monostate for none.
inline Scales scales_at(const Attrs& a, size_t from, size_t n) {
  Scales s;
  for (size_t i = 0; i < n; ++i) {
    const Attr& v = a[from + i];
    s.push_back(std::holds_alternative<double>(v) ? std::optional<double>(std::get<double>(v))
                                                  : std::nullopt);
  }
  return s;
}

// torch's upsample_{1,2,3}d_common_check; returns the output shape.
inline SymShape upsample_shape(const char* op, const SymShape& xs, const SymShape& os) {
  size_t nsp = os.size();
  KILN_CHECK(nsp >= 1 && nsp <= 3, Runtime, op, "expected 1 to 3 output sizes, got ", nsp);
  KILN_CHECK(xs.size() == nsp + 2, Runtime, op, "It is expected input_size equals to ", nsp + 2,
             ", but got size ", xs.size());
  bool positive = true;
  std::string ins, outs;
  const char* names[] = {"D", "H", "W"};
  for (size_t i = 0; i < nsp; ++i) {
    positive = positive && bool(xs[i + 2] > 0) && bool(os[i] > 0);
    const char* nm = names[3 - nsp + i];
    ins += std::string(i ? ", " : "") + nm + ": " + xs[i + 2].str();
    outs += std::string(i ? ", " : "") + nm + ": " + os[i].str();
  }
  KILN_CHECK(positive, Runtime, op, "Input and output sizes should be greater than 0, but got input (",
             ins, ") output (", outs, ")");
  KILN_CHECK(xs[1] != 0, Runtime, op, "Non-empty ", nsp + 2,
             "D data tensor expected but got a tensor with sizes ", xs);
  SymShape out{xs[0], xs[1]};
  out.insert(out.end(), os.begin(), os.end());
  return out;
}

}  // namespace kiln::upsample_detail
