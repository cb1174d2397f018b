// kiln's operators as C++ free functions (torch names and argument order).
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/core/generator.h"
#include "kiln/core/tensor.h"
#include "kiln/dispatch/op.h"
#include "kiln/ops/unary_list.h"

namespace kiln {

using OptDims = std::optional<Shape>;  // reduction dims: nullopt = all

// ---- type promotion ------------------------------------------------------------------------------
// torch.result_type over tensors (0-dim and wrapped numbers by category).
Dtype result_type(const TensorList& ts);
Dtype result_type(const Tensor& a, const Tensor& b);
Dtype result_type(const SpecList& ts);
Dtype result_type(const TensorSpec& a, const TensorSpec& b);
SymShape broadcast_shapes(const SymShape& a, const SymShape& b, const char* op = "broadcast_shapes");
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");
// Raises torch's "value cannot be converted to type X without overflow" for integer targets.
void check_scalar_fits(const char* op, const Scalar& v, Dtype d);

// ---- creation ------------------------------------------------------------------------------------
Tensor empty(const Shape& size, TensorOptions o = {});
// SymInt forms (libtorch's *_symint): sizes that stay symbolic in a trace (meta tensors in a ShapeEnv).
Tensor empty_symint(const SymShape& size, TensorOptions o = {});
Tensor zeros_symint(const SymShape& size, TensorOptions o = {});
Tensor view_symint(const Tensor& x, const SymShape& shape);
Tensor reshape_symint(const Tensor& x, const SymShape& shape);
Tensor expand_symint(const Tensor& x, const SymShape& shape);
Tensor arange_symint(SymInt end, TensorOptions o = {});  // arange(x.sym_size(1)): a length kept symbolic
Tensor zeros(const Shape& size, TensorOptions o = {});
Tensor ones(const Shape& size, TensorOptions o = {});
Tensor full(const Shape& size, const Scalar& value, TensorOptions o = {});
Tensor empty_like(const Tensor& t, std::optional<Dtype> dtype = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<Dtype> dtype = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<Dtype> dtype = std::nullopt);
Tensor full_like(const Tensor& t, const Scalar& v, std::optional<Dtype> dtype = std::nullopt);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions o = {});
Tensor arange(const Scalar& end, TensorOptions o = {});
Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps, TensorOptions o = {});
Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base = 10.0,
                TensorOptions o = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions o = {});
Tensor trace(const Tensor& x);  // the sum of a matrix's main diagonal
Tensor fill_(const Tensor& t, const Scalar& v);
Tensor zero_(const Tensor& t);

// ---- copies and conversion ---------------------------------------------------------------------
const Tensor& copy_(const Tensor& dst, const Tensor& src);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
// Memory formats (memory_format.cpp): torch.contiguous_format, preserve_format, channels_last (4-d,
// NHWC strides), channels_last_3d (5-d, NDHWC). Layouts only: kiln's kernels take any strides, and
// an op's output is contiguous whatever its inputs' format.
enum class MemoryFormat : int8_t { Contiguous, Preserve, ChannelsLast, ChannelsLast3d };
bool is_contiguous(const Tensor& t, MemoryFormat format);
MemoryFormat suggest_memory_format(const Tensor& t);
Tensor contiguous(const Tensor& t, MemoryFormat format);  // t itself when already so laid out
Tensor clone(const Tensor& t, MemoryFormat format);       // Preserve: t's own format
// Tensor.to(memory_format=): t itself when it already suggests that format, else a copy in it.
Tensor to_memory_format(const Tensor& t, MemoryFormat format);
Tensor to_dtype(const Tensor& t, Dtype d, bool copy = false);
Tensor to_device(const Tensor& t, Device d, bool copy = false);
// Options for a tensor made to go with `t`: t's dtype (or `d`) and t's device.
inline TensorOptions like(const Tensor& t) { return TensorOptions(t.dtype()).device(t.device()); }
inline TensorOptions like(const Tensor& t, Dtype d) { return TensorOptions(d).device(t.device()); }

// ---- views ---------------------------------------------------------------------------------------
Tensor view(const Tensor& t, const Shape& shape);
Tensor view_dtype(const Tensor& t, Dtype d);
Tensor reshape(const Tensor& t, const Shape& shape);
Tensor as_strided(const Tensor& t, const Shape& size, const Shape& stride,
                  std::optional<int64_t> offset = std::nullopt);
Tensor permute(const Tensor& t, const Shape& dims);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor t(const Tensor& x);
Tensor mT(const Tensor& x);
Tensor expand(const Tensor& t, const Shape& shape);
Tensor expand_as(const Tensor& t, const Tensor& other);
Tensor broadcast_to(const Tensor& t, const Shape& shape);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step = 1);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor squeeze(const Tensor& t, std::optional<Shape> dims = std::nullopt);
Tensor flatten(const Tensor& t, int64_t start = 0, int64_t end = -1);
Tensor unflatten(const Tensor& t, int64_t dim, const Shape& sizes);
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t d1 = 0, int64_t d2 = 1);
Tensor unfold(const Tensor& t, int64_t dim, int64_t size, int64_t step);
Tensor movedim(const Tensor& t, const Shape& src, const Shape& dst);
Tensor view_as_real(const Tensor& t);
Tensor view_as_complex(const Tensor& t);
Tensor real(const Tensor& t);
Tensor imag(const Tensor& t);
Tensor conj(const Tensor& t);
TensorList split(const Tensor& t, int64_t size, int64_t dim = 0);
TensorList split_with_sizes(const Tensor& t, const Shape& sizes, int64_t dim = 0);
TensorList chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);
TensorList unbind(const Tensor& t, int64_t dim = 0);
TensorList broadcast_tensors(const TensorList& ts);

// ---- joining -------------------------------------------------------------------------------------
Tensor cat(const TensorList& ts, int64_t dim = 0);
Tensor stack(const TensorList& ts, int64_t dim = 0);
Tensor hstack(const TensorList& ts);
Tensor vstack(const TensorList& ts);

// ---- elementwise ---------------------------------------------------------------------------------
#define KILN_DECL_UNARY(name, code, rule) \
  Tensor name(const Tensor& x);           \
  const Tensor& name##_(const Tensor& x);
KILN_UNARY_OPS(KILN_DECL_UNARY)
#undef KILN_DECL_UNARY
#define KILN_DECL_BINARY(name, code, rule, numbers)     \
  Tensor name(const Tensor& a, const Tensor& b);        \
  Tensor name(const Tensor& a, const Scalar& b);        \
  const Tensor& name##_(const Tensor& a, const Tensor& b); \
  const Tensor& name##_(const Tensor& a, const Scalar& b);
KILN_BINARY_OPS(KILN_DECL_BINARY)
#undef KILN_DECL_BINARY
// Runs a unary/binary op from the lists above by name into out (out= variants).
const Tensor& unary_out(const char* name, const Tensor& x, const Tensor& out);
const Tensor& binary_out(const char* name, const Tensor& a, const Tensor& b, const Tensor& out);

Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
const Tensor& add_(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
const Tensor& sub_(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
const Tensor& add_out(const Tensor& out, const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor rsub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
// rounding_mode: "" (true division), "trunc" or "floor".
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
const Tensor& div_(const Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
Tensor round(const Tensor& x, std::optional<int64_t> decimals = std::nullopt);
const Tensor& round_(const Tensor& x, std::optional<int64_t> decimals = std::nullopt);
Tensor logit(const Tensor& x, std::optional<double> eps = std::nullopt);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);  // undefined = no bound
const Tensor& clamp_(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt, std::optional<double> neginf = std::nullopt);
const Tensor& nan_to_num_(const Tensor& x, std::optional<double> nan = std::nullopt,
                          std::optional<double> posinf = std::nullopt, std::optional<double> neginf = std::nullopt);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
Tensor elu(const Tensor& x, double alpha = 1.0, double scale = 1.0, double input_scale = 1.0);
Tensor selu(const Tensor& x);
Tensor celu(const Tensor& x, double alpha = 1.0);
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor softsign(const Tensor& x);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0);
Tensor threshold(const Tensor& x, double threshold, double value);
// torch.nn.functional's shrinkage activations (floating x): hardshrink zeroes [-lambd, lambd];
// softshrink also moves the rest lambd towards zero (lambd >= 0); tanhshrink is x - tanh(x).
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
Tensor softshrink(const Tensor& x, double lambd = 0.5);
Tensor tanhshrink(const Tensor& x);
// F.glu: a * sigmoid(b), a and b the halves of x along dim (its size even).
Tensor glu(const Tensor& x, int64_t dim = -1);
// torch.deg2rad / rad2deg: x * pi / 180 and x * 180 / pi (integral x in the default dtype; complex refused).
Tensor deg2rad(const Tensor& x);
Tensor rad2deg(const Tensor& x);
// torch.float_power: pow in float64 (complex128 when either side is complex).
Tensor float_power(const Tensor& x, const Tensor& exponent);
Tensor float_power(const Tensor& x, const Scalar& exponent);
Tensor float_power(const Scalar& x, const Tensor& exponent);
// torch.ldexp: x * 2^other (the result dtype promotes with a floating one).
Tensor ldexp(const Tensor& x, const Tensor& other);
// torch.frexp (floating x): mantissa in (-1, -0.5] U [0.5, 1) of x's dtype and int32 exponent with
// x = mantissa * 2^exponent; zero, inf and NaN keep x as mantissa with exponent 0.
std::tuple<Tensor, Tensor> frexp(const Tensor& x);
// torch.isreal: true where the imaginary part is zero (every element of a real tensor).
Tensor isreal(const Tensor& x);
// torch.dist: the p-norm of x - y (broadcast).
Tensor dist(const Tensor& x, const Tensor& y, const Scalar& p = 2);
// torch.renorm: each slice along dim whose p-norm exceeds maxnorm scaled down to it.
Tensor renorm(const Tensor& x, const Scalar& p, int64_t dim, const Scalar& maxnorm);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& weight);
Tensor lerp(const Tensor& a, const Tensor& b, const Scalar& weight);
Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, const Scalar& value = 1);
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, const Scalar& value = 1);
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);
Tensor polar(const Tensor& abs, const Tensor& angle);
Tensor complex(const Tensor& real, const Tensor& imag);

// ---- reductions ----------------------------------------------------------------------------------
Tensor sum(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false,
           std::optional<Dtype> dtype = std::nullopt);
Tensor nansum(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false,
              std::optional<Dtype> dtype = std::nullopt);
Tensor mean(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false,
            std::optional<Dtype> dtype = std::nullopt);
Tensor nanmean(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false,
               std::optional<Dtype> dtype = std::nullopt);
Tensor prod(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false,
            std::optional<Dtype> dtype = std::nullopt);
Tensor amax(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false);
Tensor amin(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false);
Tensor all(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false);
Tensor any(const Tensor& x, OptDims dims = std::nullopt, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
std::tuple<Tensor, Tensor> aminmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
                                   bool keepdim = false);
Tensor var(const Tensor& x, OptDims dims = std::nullopt, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, OptDims dims = std::nullopt, double correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, OptDims dims = std::nullopt,
                                    double correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& x, OptDims dims = std::nullopt,
                                    double correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor vector_norm(const Tensor& x, double ord = 2, OptDims dims = std::nullopt, bool keepdim = false,
                   std::optional<Dtype> dtype = std::nullopt);
Tensor count_nonzero(const Tensor& x, OptDims dims = std::nullopt);
Tensor softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<Dtype> dtype = std::nullopt);
Tensor logcumsumexp(const Tensor& x, int64_t dim);
std::tuple<Tensor, Tensor> cummax(const Tensor& x, int64_t dim);
std::tuple<Tensor, Tensor> cummin(const Tensor& x, int64_t dim);

// ---- matmul --------------------------------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// torch._scaled_mm: float8 self (M, K) @ float8 mat2 (K, N), any pairing of e4m3fn / e5m2, with
// float32 scales, tensor-wise (one element each) or row-wise (scale_a (M, 1), scale_b (1, N),
// contiguous); out_dtype defaults to self's float8 dtype; differentiable in self, mat2 and bias.
Tensor _scaled_mm(const Tensor& self, const Tensor& mat2, const Tensor& scale_a, const Tensor& scale_b,
                  const Tensor& bias = Tensor(), const Tensor& scale_result = Tensor(),
                  std::optional<Dtype> out_dtype = std::nullopt, bool use_fast_accum = false);
// torch._grouped_mm: the mixture-of-experts grouped product in torch's four layouts (2D x 3D, 3D x 2D,
// 2D x 2D with int32 cumulative end offsets `offs`; 3D x 3D without), float32 / bfloat16 / float16,
// any strides, optional bias, zeros past offs[-1]; differentiable in self, mat2 and bias.
Tensor _grouped_mm(const Tensor& self, const Tensor& mat2, const Tensor& offs = Tensor(), const Tensor& bias = Tensor(),
                   std::optional<Dtype> out_dtype = std::nullopt);
Tensor mv(const Tensor& a, const Tensor& v);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor vdot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
               const Scalar& alpha = 1);
Tensor addbmm(const Tensor& c, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
              const Scalar& alpha = 1);
Tensor addmv(const Tensor& c, const Tensor& a, const Tensor& v, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor inner(const Tensor& a, const Tensor& b);
Tensor tensordot(const Tensor& a, const Tensor& b, const Shape& dims_a, const Shape& dims_b);
// torch's tensordot(a, b, dims=n): the last n dims of a against the first n of b (0 <= n <= both ndims)
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims);
Tensor einsum(const std::string& equation, const TensorList& operands);
Tensor kron(const Tensor& a, const Tensor& b);

// ---- indexing ------------------------------------------------------------------------------------
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor nonzero(const Tensor& x);
Tensor flip(const Tensor& x, const Shape& dims);
// aten::index: one optional index tensor per leading dim (undefined = whole dim); bool masks allowed.
Tensor index(const Tensor& x, const TensorList& indices);
const Tensor& index_put_(const Tensor& x, const TensorList& indices, const Tensor& values,
                         bool accumulate = false);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- random --------------------------------------------------------------------------------------
Tensor rand(const Shape& size, TensorOptions o = {}, Generator* g = nullptr);
Tensor randn(const Shape& size, TensorOptions o = {}, Generator* g = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions o = kInt64,
               Generator* g = nullptr);
Tensor randperm(int64_t n, TensorOptions o = kInt64, Generator* g = nullptr);
void manual_seed(uint64_t seed);
const Tensor& uniform_(const Tensor& t, double from = 0, double to = 1, Generator* g = nullptr);
// Tensor.random_: integers drawn uniformly into t's dtype, from [from, to) with `to`; without it from
// `from` to the largest integer the dtype holds (2^digits for floating dtypes, the maximum for integral
// ones, 1 for bool) inclusive; from = INT64_MIN without `to`: every int64 value. random_(t): from 0.
const Tensor& random_(const Tensor& t, int64_t from, std::optional<int64_t> to, Generator* g = nullptr);
const Tensor& random_(const Tensor& t, Generator* g = nullptr);
const Tensor& normal_(const Tensor& t, double mean = 0, double std = 1, Generator* g = nullptr);
const Tensor& exponential_(const Tensor& t, double lambd = 1, Generator* g = nullptr);
const Tensor& log_normal_(const Tensor& t, double mean = 1, double std = 2, Generator* g = nullptr);
const Tensor& geometric_(const Tensor& t, double p, Generator* g = nullptr);
const Tensor& cauchy_(const Tensor& t, double median = 0, double sigma = 1, Generator* g = nullptr);
Tensor bernoulli(const Tensor& p, Generator* g = nullptr);
// self's shape and dtype, each element 1 with probability p (p: a number, or a tensor broadcast to self)
Tensor bernoulli(const Tensor& self, double p, Generator* g = nullptr);
const Tensor& bernoulli_(const Tensor& self, double p = 0.5, Generator* g = nullptr);
const Tensor& bernoulli_(const Tensor& self, const Tensor& p, Generator* g = nullptr);
Tensor multinomial(const Tensor& probs, int64_t n, bool replacement = false, Generator* g = nullptr);

// ---- printing ------------------------------------------------------------------------------------
std::string repr(const Tensor& t);
// torch's print options (torch.set_printoptions): digits after the point, the element count above
// which a tensor is summarised (edgeitems at each end of each dim), the line width, and scientific
// notation forced on or off (nullopt: torch's choice from the values). Process-wide.
struct PrintOptions {
  int precision = 4;
  double threshold = 1000;  // may be inf ("full" profile)
  int edgeitems = 3;
  int linewidth = 80;
  std::optional<bool> sci_mode;
};
const PrintOptions& print_options();
void set_print_options(const PrintOptions& o);

}  // namespace kiln
