// Shape ops (kiln/ops/shape.cpp) and scatter-style indexing ops (kiln/ops/scatter.cpp), torch names
// and argument order.
//
// Every index is range-checked before anything is written: an out-of-range index raises the error kind
// torch raises for the same op (IndexError or RuntimeError), never a crash. Unsupported dtypes raise
// NotImplementedError where torch does. Ops that have a torch in-place variant `name_` have one here
// too; the in-place form writes into self and returns it.
#pragma once

#include <optional>
#include <string>

#include "kiln/core/scalar.h"
#include "kiln/core/tensor.h"
#include "kiln/dispatch/op.h"

namespace kiln {

// ---- scatter family (scatter.cpp) ------------------------------------------------------------------
// reduce: nullopt (plain scatter), "add" or "multiply" (torch's legacy reduce argument).
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               const std::optional<std::string>& reduce = std::nullopt);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value,
               const std::optional<std::string>& reduce = std::nullopt);
const Tensor& scatter_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                       const std::optional<std::string>& reduce = std::nullopt);
const Tensor& scatter_(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value,
                       const std::optional<std::string>& reduce = std::nullopt);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
const Tensor& scatter_add_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// reduce: "sum", "prod", "mean", "amax" or "amin".
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
const Tensor& scatter_reduce_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                              const std::string& reduce, bool include_self = true);

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha = 1);
const Tensor& index_add_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                         const Scalar& alpha = 1);
Tensor index_copy(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
const Tensor& index_copy_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);  // 0-dim value
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
const Tensor& index_fill_(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& value);

// out-of-place: x and mask broadcast together; in-place: mask must broadcast to x.
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source);
const Tensor& masked_scatter_(const Tensor& x, const Tensor& mask, const Tensor& source);

// Linear (row-major) indices into x; negative indices count from the end.
Tensor take(const Tensor& x, const Tensor& index);
// dim = nullopt: x and indices flattened.
Tensor take_along_dim(const Tensor& x, const Tensor& indices, std::optional<int64_t> dim = std::nullopt);
Tensor put(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate = false);
const Tensor& put_(const Tensor& x, const Tensor& index, const Tensor& source, bool accumulate = false);

// torch.index_put / Tensor.index_put_ with torch's argument checks (values must have x's dtype; a
// single bool mask with a one-element value fills like masked_fill). Undefined indices = whole dim.
Tensor index_put(const Tensor& x, const TensorList& indices, const Tensor& values, bool accumulate = false);
const Tensor& index_put_checked_(const Tensor& x, const TensorList& indices, const Tensor& values,
                                 bool accumulate = false);

// ---- shape ops (shape.cpp) -------------------------------------------------------------------------
// dims empty: x is flattened, rolled and restored (then shifts must have one element).
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
Tensor rot90(const Tensor& x, int64_t k = 1, const Shape& dims = {0, 1});
Tensor repeat(const Tensor& x, const Shape& repeats);
Tensor tile(const Tensor& x, const Shape& dims);
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
// torch.repeat_interleave(repeats): index i repeated repeats[i] times (repeats' dtype).
Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size = std::nullopt);
Tensor diag(const Tensor& x, int64_t diagonal = 0);
Tensor diag_embed(const Tensor& x, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
// indexing: "ij" or "xy". Results are broadcast views of the inputs.
TensorList meshgrid(const TensorList& ts, const std::string& indexing = "ij");

// torch.nn.functional.pad. mode: "constant", "reflect", "replicate" or "circular"; value only for
// constant (default 0).
Tensor pad(const Tensor& x, const Shape& pad, const std::string& mode = "constant",
           std::optional<double> value = std::nullopt);
// torch.nn.functional.one_hot: int64 classes; num_classes = -1 infers max + 1.
Tensor one_hot(const Tensor& x, int64_t num_classes = -1);
// torch.embedding(weight, indices, padding_idx, ...): rows of weight (2-D) at indices (int32/int64).
// padding_idx only affects the gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1,
                 bool scale_grad_by_freq = false, bool sparse = false);
// torch.embedding_renorm_: rows of weight referenced by indices whose norm_type-norm exceeds max_norm
// are scaled to max_norm (in place).
const Tensor& embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type);

namespace shape_detail {
// torch's checked Scalar -> dtype conversion: RuntimeError "value cannot be converted to type X without
// overflow" when v does not fit (integers out of range, finite floats beyond the type's range, complex
// with a non-zero imaginary part into a real type). bool targets accept anything.
void check_scalar_fits(const Scalar& v, Dtype d, const char* op);
// NotImplementedError in torch's words: "<kernel>" not implemented for '<Dtype>'.
[[noreturn]] void not_implemented(const char* op, const char* kernel, Dtype d);
// torch's name for a dtype in error messages ('Float', 'UInt16', ...).
const char* torch_type_name(Dtype d);
}  // namespace shape_detail

}  // namespace kiln
