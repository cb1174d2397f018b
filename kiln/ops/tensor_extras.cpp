// torch's addr, diagonal_scatter / select_scatter / slice_scatter, index_reduce, narrow_copy,
// sum_to_size, fill_diagonal_, unravel_index and combinations: composites of kiln ops with torch 2.13's
// schemas, argument checks and dtype rules. The *_scatter ops write src into a view of a copy of
// self, so their gradients are autograd's (src's through the view, self's outside it).
#include <complex>
#include <cstring>
#include <functional>

#include "kiln/autograd/autograd.h"
#include "kiln/autograd/function.h"
#include "kiln/core/format.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/ops/tensor_utils.h"

namespace kiln {

namespace {
const char* tname(Dtype d) { return shape_detail::torch_type_name(d); }

// An int64 tensor of the values.
Tensor int64_values(const Shape& v) {
  Tensor t = make_tensor({static_cast<int64_t>(v.size())}, kInt64);
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// The view of `self` that a *_scatter op fills, and its size check against src.
Tensor scatter_into(const char* op, const Tensor& self, const Tensor& src,
                    const std::function<Tensor(const Tensor&)>& view) {
  Tensor out = clone(self);
  Tensor v = view(out);
  KILN_CHECK(v.sizes() == src.sizes(), Runtime, op,
             "expected src to have a size equal to the slice of self. src size = ", shape_list(src.sizes()),
             ", slice size = ", shape_list(v.sizes()));
  copy_(v, src);
  return out;
}
}  // namespace

Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta, const Scalar& alpha) {
  const char* op = "addr";
  KILN_CHECK(vec1.dim() == 1, Runtime, op, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  KILN_CHECK(vec2.dim() == 1, Runtime, op, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  const Dtype d = result_type(TensorList{self, vec1, vec2});
  if (is_integral(d, true)) {  // (bool included, as torch's check)
    KILN_CHECK(!beta.is_floating() && !beta.is_complex(), Runtime, op,
               "For integral input tensors, argument beta must not be a floating point number.");
    KILN_CHECK(!alpha.is_floating() && !alpha.is_complex(), Runtime, op,
               "For integral input tensors, argument alpha must not be a floating point number.");
  }
  if (d != kBool) {
    KILN_CHECK(!beta.is_bool(), Runtime, op, "Boolean beta only supported for Boolean results.");
    KILN_CHECK(!alpha.is_bool(), Runtime, op, "Boolean alpha only supported for Boolean results.");
  }
  if (!is_complex(d))  // (a complex scalar with no imaginary part converts)
    KILN_CHECK(beta.to_complex().imag() == 0 && alpha.to_complex().imag() == 0, Runtime, op,
               "value cannot be converted to type ", dtype_name(d), " without overflow");
  // a scalar is zero / one only when every part is (complex ones have an imaginary part)
  auto is_zero = [](const Scalar& v) { return v.to_complex() == std::complex<double>(0, 0); };
  auto is_one = [](const Scalar& v) { return v.to_complex() == std::complex<double>(1, 0); };
  if (d == kBool) {
    // torch: (beta && self) || (alpha && vec1 outer vec2)
    Tensor prod = logical_and(unsqueeze(vec1, 1), unsqueeze(vec2, 0));
    Tensor r = !is_zero(alpha) ? prod : zeros_like(prod);
    Tensor s = expand(self, r.sizes());
    return !is_zero(beta) ? logical_or(s, r) : logical_or(r, zeros_like(r));
  }
  Tensor prod = mul(unsqueeze(vec1, 1), unsqueeze(vec2, 0));
  Tensor scaled = is_one(alpha) ? prod : mul(prod, alpha);
  Tensor s = expand(self, prod.sizes());  // (torch: self must broadcast to (n, m))
  // beta = 0: self is ignored, its NaN / inf included (its gradient is then zero)
  if (is_zero(beta)) return to_dtype(add(scaled, where(zeros_like(s, kBool), s, zeros_like(s))), d);
  return add(is_one(beta) ? s : mul(s, beta), scaled);
}

Tensor diagonal_scatter(const Tensor& self, const Tensor& src, int64_t offset, int64_t dim1, int64_t dim2) {
  return scatter_into("diagonal_scatter", self, src,
                      [&](const Tensor& t) { return diagonal(t, offset, dim1, dim2); });
}

Tensor select_scatter(const Tensor& self, const Tensor& src, int64_t dim, int64_t index) {
  return scatter_into("select_scatter", self, src, [&](const Tensor& t) { return select(t, dim, index); });
}

Tensor slice_scatter(const Tensor& self, const Tensor& src, int64_t dim, std::optional<int64_t> start,
                     std::optional<int64_t> end, int64_t step) {
  KILN_CHECK(step > 0, Runtime, "slice_scatter", "slice step must be positive");
  return scatter_into("slice_scatter", self, src, [&](const Tensor& t) { return slice(t, dim, start, end, step); });
}

Tensor index_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    const std::string& reduce, bool include_self) {
  const char* op = "index_reduce";
  KILN_CHECK(reduce == "prod" || reduce == "mean" || reduce == "amax" || reduce == "amin", Runtime, op,
             "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", reduce, ".");
  KILN_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, Runtime, op,
             "index_reduce_(): Expected dtype int32/int64 for index but got: ", tname(index.dtype()));
  KILN_CHECK(index.dim() <= 1, Index, op, "index_reduce_(): Index is supposed to be a vector, but got dim: ",
             index.dim(), " with type: ", tname(index.dtype()), " and size: ", shape_list(index.sizes()));
  const int64_t nd = std::max<int64_t>(self.dim(), 1);
  KILN_CHECK(dim >= -nd && dim < nd, Index, op, "Dimension out of range (expected to be in range of [", -nd, ", ",
             nd - 1, "], but got ", dim, ")");
  const int64_t d = dim < 0 ? dim + nd : dim;
  // source: self's shape but along dim (0-dim only with a 0-dim self)
  bool same_rank = self.dim() == 0 ? source.dim() == 0 : source.dim() == self.dim();
  for (int64_t i = 0; same_rank && i < self.dim(); ++i)
    same_rank = i == d || source.sizes()[i] == self.sizes()[i];
  KILN_CHECK(same_rank, Runtime, op, "index_reduce_(): source tensor shape must match self tensor shape, excluding "
             "the specified dimension. Got self.shape = ", shape_list(self.sizes()), " source.shape = ",
             shape_list(source.sizes()));
  const int64_t src_len = source.dim() == 0 ? 1 : source.sizes()[d];
  KILN_CHECK(index.numel() == src_len, Runtime, op, "index_reduce_(): Number of indices (", index.numel(),
             ") should be equal to source.size(dim): (", src_len, "), for dim: ", dim);
  KILN_CHECK(source.dtype() == self.dtype(), Runtime, op, "index_reduce_(): self (", tname(self.dtype()),
             ") and source (", tname(source.dtype()), ") must have the same scalar type");
  if (self.dim() == 0)
    return scatter_reduce(self, 0, reshape(to_dtype(index, kInt64), {}), source, reduce, include_self);
  if (index.numel() > 0) {
    const int64_t len = self.dim() == 0 ? 1 : self.sizes()[d];
    const int64_t lo = amin(index).item<int64_t>(), hi = amax(index).item<int64_t>();
    KILN_CHECK(lo >= 0 && hi < len, Index, op, "index out of range in self");
  }
  // the index along dim, broadcast over source's other dims: scatter_reduce's form
  Shape ishape(source.dim(), 1);
  ishape[d] = index.numel();
  Tensor idx = expand(reshape(to_dtype(index, kInt64), ishape), source.sizes());
  return scatter_reduce(self, d, idx, source, reduce, include_self);
}

Tensor narrow_copy(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  return clone(narrow(self, dim, start, length), MemoryFormat::Contiguous);
}

Tensor sum_to_size(const Tensor& self, const Shape& size) {
  const char* op = "sum_to_size";
  const int64_t lead = self.dim() - static_cast<int64_t>(size.size());
  bool ok = lead >= 0;
  for (size_t i = 0; ok && i < size.size(); ++i) {
    const int64_t have = self.sizes()[lead + i];
    ok = size[i] == have || size[i] == 1;
  }
  KILN_CHECK(ok, Runtime, op, "size {", shape_list(size).substr(1, shape_list(size).size() - 2),
             "} is not expandable to size {",
             shape_list(self.sizes()).substr(1, shape_list(self.sizes()).size() - 2), "}.");
  Shape dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  Shape keep;
  for (size_t i = 0; i < size.size(); ++i)
    if (size[i] == 1 && self.sizes()[lead + i] != 1) keep.push_back(lead + static_cast<int64_t>(i));
  if (dims.empty() && keep.empty()) return self;
  Tensor r = self;
  if (!keep.empty()) r = sum(r, keep, /*keepdim=*/true);
  if (!dims.empty()) r = sum(r, dims, /*keepdim=*/false);
  return r;
}

const Tensor& fill_diagonal_(const Tensor& self, const Scalar& fill_value, bool wrap) {
  const char* op = "fill_diagonal_";
  const int64_t nd = self.dim();
  KILN_CHECK(nd >= 2, Runtime, op, "dimensions must larger than 1");
  const int64_t h = self.sizes()[0];
  if (nd > 2)
    for (int64_t i = 1; i < nd; ++i)
      KILN_CHECK(self.sizes()[i] == h, Runtime, op, "all dimensions of input must be of equal length");
  // a tall matrix with wrap restarts the diagonal every (cols + 1) rows, as numpy's and torch's
  if (nd == 2 && wrap && h > self.sizes()[1] + 1) {
    const int64_t w = self.sizes()[1];
    for (int64_t start = 0; start < h; start += w + 1)
      fill_(diagonal(narrow(self, 0, start, std::min(w, h - start)), 0, 0, 1), fill_value);
    return self;
  }
  // element i of the main diagonal sits i * (sum of the strides) past the first
  int64_t n = h, step = 0;
  for (int64_t i = 0; i < nd; ++i) {
    n = std::min(n, self.sizes()[i]);
    step += self.strides()[i];
  }
  fill_(as_strided(self, {n}, {step}, self.storage_offset()), fill_value);
  return self;
}

TensorList unravel_index(const Tensor& indices, const Shape& shape) {
  const char* op = "unravel_index";
  KILN_CHECK(is_integral(indices.dtype(), false), Type, op, "expected 'indices' to be integer dtype, but got ",
             dtype_name(indices.dtype()));
  for (int64_t s : shape)
    KILN_CHECK(s >= 0, Value, op, "'shape' cannot have negative values, but got ", shape_list(shape));
  const int64_t nd = static_cast<int64_t>(shape.size());
  Shape coefs(nd, 1);
  for (int64_t i = nd - 2; i >= 0; --i) coefs[i] = coefs[i + 1] * shape[i + 1];
  Tensor c = int64_values(coefs), s = int64_values(shape);
  // floor division and a floor modulo: Python's (and torch's) rules, so negative indices wrap
  Tensor r = remainder(floor_divide(unsqueeze(to_dtype(indices, kInt64), -1), c), s);
  return unbind(r, -1);
}

Tensor combinations(const Tensor& self, int64_t r, bool with_replacement) {
  const char* op = "combinations";
  KILN_CHECK(self.dim() == 1, Runtime, op, "Expect a 1D vector, but got shape ", shape_list(self.sizes()));
  KILN_CHECK(r >= 0, Runtime, op, "Expect a non-negative number, but got ", r);
  if (r == 0) return empty({0}, TensorOptions(self.dtype()));
  const int64_t n = self.numel();
  if (n == 0 || (!with_replacement && r > n)) return empty({0, r}, TensorOptions(self.dtype()));
  if (r == 1) return clone(unsqueeze(self, 1), MemoryFormat::Contiguous);
  // every r-tuple of positions, kept where they increase (strictly, or not with replacement)
  TensorList grids(r, arange(Scalar(n), TensorOptions(kInt64)));
  Tensor idx = cartesian_prod(grids);  // (n^r, r), lexicographic: torch's order
  Tensor keep = ones({idx.sizes()[0]}, TensorOptions(kBool));
  for (int64_t j = 0; j + 1 < r; ++j) {
    Tensor a = select(idx, 1, j), b = select(idx, 1, j + 1);
    keep = logical_and(keep, with_replacement ? le(a, b) : lt(a, b));
  }
  Tensor rows = index_select(idx, 0, reshape(nonzero(keep), {-1}));
  return reshape(index_select(self, 0, reshape(rows, {-1})), {rows.sizes()[0], r});
}

namespace {

std::tuple<Tensor, Tensor> histogram_values(const Tensor& self, const Tensor& edges, const Tensor& weight,
                                            bool density);

// torch's histogramdd checks for one dimension (input float32 / float64; weight of input's shape and
// dtype), and the counting: each value in [edges[0], edges[-1]] falls in the bin upper_bound(edges, x)
// - 1, the last edge closing the last bin; values outside (and NaN) are not counted.
// torch's histogram has no derivative: its result refuses a backward through it.
struct HistogramOp : autograd::Function<HistogramOp> {
  static const char* name() { return "Histogram"; }
  static TensorList forward(autograd::AutogradContext*, const TensorList&, Tensor hist) { return {std::move(hist)}; }
  static TensorList backward(autograd::AutogradContext*, const TensorList&) {
    KILN_FAIL(Runtime, "histogram", "derivative for aten::histogram is not implemented");
  }
};

std::tuple<Tensor, Tensor> histogram_core(const Tensor& self, const Tensor& edges, const Tensor& weight,
                                          bool density) {
  Tensor hist;
  {
    NoGradGuard ng;
    hist = std::get<0>(histogram_values(self, edges, weight, density));
  }
  if (grad_mode_enabled() && (requires_grad(self) || (weight.defined() && requires_grad(weight))))
    hist = HistogramOp::apply({self, weight}, hist)[0];
  return {hist, edges};
}

std::tuple<Tensor, Tensor> histogram_values(const Tensor& self, const Tensor& edges, const Tensor& weight,
                                            bool density) {
  const int64_t nbins = edges.numel() - 1;
  Tensor x = reshape(self, {-1});
  Tensor w = weight.defined() ? reshape(weight, {-1}) : ones_like(x);
  Tensor lo = select(edges, 0, 0), hi = select(edges, 0, nbins);
  Tensor in = logical_and(ge(x, lo), le(x, hi));
  Tensor pos = sub(searchsorted(edges, contiguous(x), false, /*right=*/true), Scalar(1));
  pos = clamp(pos, Scalar(0), Scalar(nbins - 1));  // (the last edge; outside values are masked below)
  Tensor hist = scatter_add(zeros({nbins}, TensorOptions(self.dtype())), 0, pos,
                            where(in, w, zeros_like(w)));
  if (density) {
    Tensor widths = sub(narrow(edges, 0, 1, nbins), narrow(edges, 0, 0, nbins));
    hist = div(hist, mul(sum(hist), widths));
  }
  return {hist, edges};
}

void check_hist_inputs(const Tensor& self, const Tensor& weight) {
  const char* op = "histogram";
  if (self.dtype() != kFloat32 && self.dtype() != kFloat64) shape_detail::not_implemented(op, "histogramdd", self.dtype());
  if (!weight.defined()) return;
  KILN_CHECK(weight.dtype() == self.dtype(), Runtime, op, "torch.histogramdd: if weight tensor is provided, input "
             "tensor and weight tensor should have the same dtype, but got input(", tname(self.dtype()),
             "), and weight(", tname(weight.dtype()), ")");
  KILN_CHECK(weight.sizes() == self.sizes(), Runtime, op, "torch.histogramdd: if weight tensor is provided it should "
             "have the same shape as the input tensor excluding its innermost dimension, but got input with shape [",
             self.numel(), ", 1] and weight with shape ", shape_list(weight.sizes()));
}

}  // namespace

std::tuple<Tensor, Tensor> histogram(const Tensor& self, const Tensor& bins, const Tensor& weight, bool density) {
  const char* op = "histogram";
  check_hist_inputs(self, weight);
  KILN_CHECK(bins.dtype() == self.dtype(), Runtime, op, "torch.histogramdd: input tensor and bins tensors should "
             "have the same dtype, but got input with dtype ", tname(self.dtype()),
             " and bins for dimension 0 with dtype ", tname(bins.dtype()));
  KILN_CHECK(bins.dim() == 1, Runtime, op, "torch.histogramdd: bins tensor should have one dimension, but got ",
             bins.dim(), " dimensions in the bins tensor for dimension 0");
  KILN_CHECK(bins.numel() > 0, Runtime, op, "torch.histogramdd: bins tensor should have at least 1 element, but "
             "got 0 elements in the bins tensor for dimension 0");
  KILN_CHECK(bins.numel() > 1, Runtime, op, "torch.histogram(): bins must be > 0, but got 0 for dimension 0");
  return histogram_core(self, contiguous(bins), weight, density);
}

std::tuple<Tensor, Tensor> histogram(const Tensor& self, int64_t bins, std::optional<std::vector<double>> range,
                                     const Tensor& weight, bool density) {
  const char* op = "histogram";
  check_hist_inputs(self, weight);
  KILN_CHECK(bins > 0, Runtime, op, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  double lo = 0, hi = 1;  // (an empty input without a range: [0, 1], torch's)
  if (range) {
    KILN_CHECK(range->size() == 2, Runtime, op, "torch.histogramdd: for a 1-dimensional histogram range should "
               "have 2 elements, but got ", range->size());
    lo = (*range)[0];
    hi = (*range)[1];
  } else if (self.numel() > 0) {
    lo = amin(self).item<double>();
    hi = amax(self).item<double>();
  }
  KILN_CHECK(std::isfinite(lo) && std::isfinite(hi), Runtime, op, "torch.histogramdd: dimension 0's range [",
             lo, ", ", hi, "] is not finite");
  KILN_CHECK(lo <= hi, Runtime, op, "torch.histogramdd: min should not exceed max, but got min ", lo,
             " max ", hi, " for dimension 0");
  if (lo == hi) {  // an empty range widens by a half on each side, as numpy's
    lo -= 0.5;
    hi += 0.5;
  }
  Tensor edges = linspace(Scalar(lo), Scalar(hi), bins + 1, TensorOptions(self.dtype()));
  return histogram_core(self, edges, weight, density);
}

namespace {

Composite c_addr{"addr(Tensor self, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                 [](const TensorList& in, const Attrs& a) -> TensorList {
                   return {addr(in[0], in[1], in[2], attr<Scalar>(a, 0), attr<Scalar>(a, 1))};
                 },
                 kAllVariants};
Composite c_diagonal_scatter{
    "diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {diagonal_scatter(in[0], in[1], attr<int64_t>(a, 0), attr<int64_t>(a, 1), attr<int64_t>(a, 2))};
    },
    kFunctionAndMethod};
Composite c_select_scatter{"select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor",
                           [](const TensorList& in, const Attrs& a) -> TensorList {
                             return {select_scatter(in[0], in[1], attr<int64_t>(a, 0), attr<int64_t>(a, 1))};
                           },
                           kFunctionAndMethod};
Composite c_slice_scatter{
    "slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {slice_scatter(in[0], in[1], attr<int64_t>(a, 0), opt_attr<int64_t>(a, 1), opt_attr<int64_t>(a, 2),
                            attr<int64_t>(a, 3))};
    },
    kFunctionAndMethod};
Composite c_index_reduce{
    "index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *, bool include_self=True) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {index_reduce(in[0], attr<int64_t>(a, 0), in[1], in[2], attr<std::string>(a, 1), attr<bool>(a, 2))};
    },
    kAllVariants};
Composite c_narrow_copy{"narrow_copy(Tensor self, int dim, SymInt start, SymInt length) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {narrow_copy(in[0], attr<int64_t>(a, 0), attr<int64_t>(a, 1), attr<int64_t>(a, 2))};
                        },
                        kFunctionAndMethod};
Composite c_sum_to_size{"sum_to_size(Tensor self, SymInt[] size) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {sum_to_size(in[0], attr<Shape>(a, 0))};
                        },
                        kMethodVariant};
Composite c_fill_diagonal{"fill_diagonal(Tensor self, Scalar fill_value, bool wrap=False) -> Tensor",
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            Tensor c = clone(in[0]);
                            return {fill_diagonal_(c, attr<Scalar>(a, 0), attr<bool>(a, 1))};
                          },
                          kInplaceVariant, 0,
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            return {fill_diagonal_(in[0], attr<Scalar>(a, 0), attr<bool>(a, 1))};
                          }};
Composite c_unravel_index{"unravel_index(Tensor indices, int[] shape) -> Tensor[]",
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            return unravel_index(in[0], attr<Shape>(a, 0));
                          },
                          kFunctionVariant};
Composite c_histogram_bins{
    "histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> "
    "(Tensor hist, Tensor bin_edges)",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      auto [h, e] = histogram(in[0], in[1], in[2], attr<bool>(a, 0));
      return {h, e};
    },
    kFunctionAndMethod};
Composite c_histogram_ct{
    "histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False) -> "
    "(Tensor hist, Tensor bin_edges)",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      auto [h, e] = histogram(in[0], attr<int64_t>(a, 0), opt_attr<std::vector<double>>(a, 1), in[1],
                              attr<bool>(a, 2));
      return {h, e};
    },
    kFunctionAndMethod};
Composite c_combinations{"combinations(Tensor self, int r=2, bool with_replacement=False) -> Tensor",
                         [](const TensorList& in, const Attrs& a) -> TensorList {
                           return {combinations(in[0], attr<int64_t>(a, 0), attr<bool>(a, 1))};
                         },
                         kFunctionVariant};

}  // namespace

}  // namespace kiln
