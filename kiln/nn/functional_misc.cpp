// torch.nn.functional's normalize, cosine_similarity, pairwise_distance, pixel_shuffle/unshuffle and
// prelu: composites of table ops written as torch writes them (so values, gradients and errors match),
// registered as composite ops for the bindings.
#include <sstream>

#include "kiln/amp/autocast.h"
#include "kiln/autograd/autograd.h"
#include "kiln/nn/functional.h"
#include "kiln/nn/utils.h"
#include "kiln/ops/composite.h"
#include "kiln/core/format.h"
#include "kiln/ops/linalg.h"
#include "kiln/ops/shape.h"

namespace kiln::nn::functional {

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  Tensor denom = clamp(linalg::vector_norm(x, p, Shape{dim}, /*keepdim=*/true), Scalar(eps), std::nullopt);
  return div(x, expand(denom, x.sizes()));
}

Tensor cosine_similarity(const Tensor& x1_, const Tensor& x2_, int64_t dim, double eps) {
  const char* op = "cosine_similarity";
  Dtype common = result_type(x1_, x2_);
  KILN_CHECK(is_floating(common), Runtime, op, "expected common dtype to be floating point, yet common dtype is ",
             dtype_name(common));
  Tensor x1 = is_floating(x1_.dtype()) || is_complex(x1_.dtype()) ? x1_ : x1_.to(common);
  Tensor x2 = is_floating(x2_.dtype()) || is_complex(x2_.dtype()) ? x2_ : x2_.to(common);
  Shape shape = broadcast_shapes(x1.sizes(), x2.sizes());
  x1 = expand(x1, shape), x2 = expand(x2, shape);
  // each divided by its norm first (the result stays in [-1, 1]); the clamps do not take part in autograd
  Tensor n1 = clone(linalg::vector_norm(x1, 2, Shape{dim}, true));
  Tensor n2 = clone(linalg::vector_norm(x2, 2, Shape{dim}, true));
  {
    NoGradGuard ng;
    clamp_(n1, Scalar(eps), std::nullopt);
    clamp_(n2, Scalar(eps), std::nullopt);
  }
  return sum(mul(div(x1, n1), div(x2, n2)), Shape{dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  const int64_t d = std::max(x1.dim(), x2.dim()) - 1;
  return linalg::vector_norm(add(sub(x1, x2), Scalar(eps)), p, Shape{d}, keepdim);
}

namespace {
void check_shuffle(const char* op, const Tensor& x, int64_t f, const char* what) {
  KILN_CHECK(x.dim() >= 3, Runtime, op, op, " expects input to have at least 3 dimensions, but got input with ",
             x.dim(), " dimension(s)");
  KILN_CHECK(f > 0, Runtime, op, op, " expects a positive ", what, ", but got ", f);
}
}  // namespace

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  const char* op = "pixel_shuffle";
  check_shuffle(op, x, r, "upscale_factor");
  const int64_t n = x.dim(), c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(c % (r * r) == 0, Runtime, op,
             "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
             "but input.size(-3)=", c, " is not divisible by ", r * r);
  Shape batch(x.sizes().begin(), x.sizes().end() - 3);
  Shape split = batch, perm, out = batch;
  for (int64_t v : {c / (r * r), r, r, h, w}) split.push_back(v);
  const int64_t b = n - 3;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t i : {0, 3, 1, 4, 2}) perm.push_back(b + i);
  for (int64_t v : {c / (r * r), h * r, w * r}) out.push_back(v);
  return reshape(permute(reshape(x, split), perm), out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  const char* op = "pixel_unshuffle";
  check_shuffle(op, x, r, "downscale_factor");
  const int64_t n = x.dim(), c = x.size(-3), h = x.size(-2), w = x.size(-1);
  KILN_CHECK(h % r == 0, Runtime, op, "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=",
             h, " is not divisible by ", r);
  KILN_CHECK(w % r == 0, Runtime, op, "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=",
             w, " is not divisible by ", r);
  Shape batch(x.sizes().begin(), x.sizes().end() - 3);
  Shape split = batch, perm, out = batch;
  for (int64_t v : {c, h / r, r, w / r, r}) split.push_back(v);
  const int64_t b = n - 3;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t i : {0, 2, 4, 1, 3}) perm.push_back(b + i);
  for (int64_t v : {c * r * r, h / r, w / r}) out.push_back(v);
  return reshape(permute(reshape(x, split), perm), out);
}

Tensor gumbel_softmax(const Tensor& logits, double tau, bool hard, int64_t dim, Generator* generator) {
  Tensor noise = empty(logits.sizes(), TensorOptions(logits.dtype()));
  {
    NoGradGuard no_grad;
    exponential_(noise, 1.0, generator);
  }
  Tensor gumbels = neg(log(noise));
  Tensor y_soft = softmax(true_divide(add(logits, gumbels), Scalar(tau)), dim);
  if (!hard) return y_soft;
  Tensor index = std::get<1>(max(y_soft, dim, /*keepdim=*/true));
  Tensor y_hard = scatter(zeros_like(logits), dim, index, Scalar(1.0));
  return add(sub(y_hard, y_soft.detach()), y_soft);
}

Tensor norm_except_dim(const Tensor& v, int64_t pow, int64_t dim) {
  const double p = static_cast<double>(pow);
  if (dim == -1) return linalg::vector_norm(v, p);
  if (dim == 0) {
    Shape out(v.dim(), 1);
    out[0] = v.size(0);
    return reshape(linalg::vector_norm(reshape(v.contiguous(), {v.size(0), -1}), p, Shape{1}), out);
  }
  if (dim == v.dim() - 1) {
    Shape out(v.dim(), 1);
    out.back() = v.size(-1);
    return reshape(linalg::vector_norm(reshape(v.contiguous(), {-1, v.size(-1)}), p, Shape{0}), out);
  }
  return transpose(norm_except_dim(transpose(v, 0, dim), pow, 0), 0, dim);
}

Tensor weight_norm(const Tensor& v, const Tensor& g, int64_t dim) {
  KILN_CHECK(v.device() == g.device(), Runtime, "_weight_norm",
             "weight_v and weight_g must be on the same device");
  return mul(v, div(g, norm_except_dim(v, 2, dim)));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  KILN_AUTOCAST(kLowerPrecision, prelu, x, weight);
  const char* op = "prelu";
  KILN_CHECK(x.dtype() == weight.dtype(), Runtime, op, "prelu: Type promoting not supported. Got ",
             dtype_name(x.dtype()), " and ", dtype_name(weight.dtype()));
  KILN_CHECK(weight.dim() <= 1, Runtime, op, "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = ",
             weight.dim());
  Tensor w = weight;
  if (weight.numel() != 1) {
    KILN_CHECK(x.dim() > 0, Runtime, op, "Not allow zero-dim input tensor.");
    const int64_t channels = x.dim() > 1 ? x.size(1) : 1;
    KILN_CHECK(channels == weight.numel(), Runtime, op,
               "Mismatch of parameter numbers and input channel size. Found parameter numbers = ", weight.numel(),
               " and channel size = ", channels, ".");
  }
  if (weight.dim() == 1 && x.dim() >= 2) {
    Shape s(static_cast<size_t>(x.dim()), 1);
    s[1] = weight.numel();
    w = reshape(weight, s);
  } else if (weight.dim() == 1 && weight.numel() == 1) {
    w = reshape(weight, {});
  }
  return where(gt(x, Scalar(0)), x, mul(w, x));
}

namespace {
Composite c_norm_except_dim{"norm_except_dim(Tensor v, int pow=2, int dim=0) -> Tensor",
                            [](const TensorList& in, const Attrs& a) -> TensorList {
                              return {norm_except_dim(in[0], attr<int64_t>(a, 0), attr<int64_t>(a, 1))};
                            },
                            kFunctionVariant};
Composite c_weight_norm{"_weight_norm(Tensor v, Tensor g, int dim=0) -> Tensor",
                        [](const TensorList& in, const Attrs& a) -> TensorList {
                          return {weight_norm(in[0], in[1], attr<int64_t>(a, 0))};
                        },
                        kFunctionVariant};
Composite c_normalize{"normalize(Tensor input, float p=2., int dim=1, float eps=1e-12) -> Tensor",
                      [](const TensorList& in, const Attrs& a) -> TensorList {
                        return {normalize(in[0], attr<double>(a, 0), attr<int64_t>(a, 1), attr<double>(a, 2))};
                      },
                      kFunctionVariant};
Composite c_cosine_similarity{"cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor",
                              [](const TensorList& in, const Attrs& a) -> TensorList {
                                return {cosine_similarity(in[0], in[1], attr<int64_t>(a, 0), attr<double>(a, 1))};
                              },
                              kFunctionVariant};
Composite c_pairwise_distance{
    "pairwise_distance(Tensor x1, Tensor x2, float p=2, float eps=1e-06, bool keepdim=False) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {pairwise_distance(in[0], in[1], attr<double>(a, 0), attr<double>(a, 1), attr<bool>(a, 2))};
    },
    kFunctionVariant};
Composite c_pixel_shuffle{"pixel_shuffle(Tensor self, int upscale_factor) -> Tensor",
                          [](const TensorList& in, const Attrs& a) -> TensorList {
                            return {pixel_shuffle(in[0], attr<int64_t>(a, 0))};
                          },
                          kFunctionVariant};
Composite c_pixel_unshuffle{"pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor",
                            [](const TensorList& in, const Attrs& a) -> TensorList {
                              return {pixel_unshuffle(in[0], attr<int64_t>(a, 0))};
                            },
                            kFunctionVariant};
Composite c_prelu{"prelu(Tensor self, Tensor weight) -> Tensor",
                  [](const TensorList& in, const Attrs&) -> TensorList { return {prelu(in[0], in[1])}; },
                  kFunctionAndMethod};
}  // namespace

}  // namespace kiln::nn::functional

namespace kiln::nn::utils::rnn {

Tensor pad_sequence(const TensorList& seqs, bool batch_first, double padding_value, const std::string& side) {
  const char* op = "pad_sequence";
  KILN_CHECK(!seqs.empty(), Runtime, op, "received an empty list of sequences");
  KILN_CHECK(side == "right" || side == "left", Runtime, op,
             "Expected padding_side to be one of left or right, but got ", side, ".");
  int64_t max_len = 0;
  for (const Tensor& t : seqs) {
    KILN_CHECK(t.dim() >= 1, Runtime, op, "expected every sequence to have at least one dimension");
    max_len = std::max(max_len, t.size(0));
  }
  // each sequence padded along its first dimension (differentiable), then stacked along the batch
  const Tensor& first = seqs[0];
  TensorList rows;
  for (const Tensor& t : seqs) {
    Tensor x = t.dtype() == first.dtype() ? t : t.to(first.dtype());
    const int64_t extra = max_len - x.size(0);
    Shape p(static_cast<size_t>(2 * x.dim()), 0);  // (last dim first) ..., dim 0 at the end
    p[p.size() - (side == "left" ? 2 : 1)] = extra;
    rows.push_back(extra ? pad(x, p, "constant", padding_value) : x);
  }
  for (size_t i = 1; i < rows.size(); ++i)
    KILN_CHECK(rows[i].sizes() == rows[0].sizes(), Runtime, op, "The size of tensor a (", rows[i].dim() > 1 ? rows[i].size(-1) : 0,
               ") must match the size of tensor b (", rows[0].dim() > 1 ? rows[0].size(-1) : 0,
               ") at a trailing dimension: sequence ", i, " has shape ", shape_list(seqs[i].sizes()),
               ", sequence 0 has ", shape_list(seqs[0].sizes()));
  return stack(rows, batch_first ? 0 : 1);
}

namespace {
Composite c_pad_sequence{
    "pad_sequence(Tensor[] sequences, bool batch_first=False, float padding_value=0.0, str padding_side=\"right\") -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {pad_sequence(in, attr<bool>(a, 0), attr<double>(a, 1), attr<std::string>(a, 2))};
    },
    kFunctionVariant};
}  // namespace

}  // namespace kiln::nn::utils::rnn
