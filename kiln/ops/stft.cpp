// torch.stft / torch.istft: framing (unfold), windowing and kiln.fft's transforms, with overlap-add
// (fold) and the window envelope for the inverse, written in torch 2.13's order (SpectralOps.cpp) so
// that shapes, normalisation, padding and errors match; autograd comes from the parts.
#include <sstream>

#include "kiln/core/format.h"
#include "kiln/ops/composite.h"
#include "kiln/ops/fft.h"
#include "kiln/ops/nn_ops.h"
#include "kiln/ops/ops.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/tensor_utils.h"

namespace kiln {

namespace {

// torch prefixes its stft / istft errors with the call: "stft(torch.FloatTensor[100], n_fft=200, ...) : "
std::string call_str(const char* op, const Tensor& x, int64_t n_fft, int64_t hop, int64_t win, const Tensor& window) {
  std::ostringstream s;
  s << op << "(" << shape_detail::torch_type_name(x.dtype()) << "Tensor" << shape_list(x.sizes()) << ", n_fft=" << n_fft
    << ", hop_length=" << hop << ", win_length=" << win << ", window=";
  if (window.defined()) s << "Tensor" << shape_list(window.sizes());
  else s << "None";
  s << ") : ";
  return s.str();
}

// The window padded to n_fft, centred ((n_fft - win_length) / 2 zeros on the left), as torch pads it.
Tensor full_window(const Tensor& window, int64_t n_fft, int64_t win_length) {
  if (win_length == n_fft) return window;
  const int64_t left = (n_fft - win_length) / 2;
  return pad(window, {left, n_fft - win_length - left});
}

}  // namespace

Tensor stft(const Tensor& self, int64_t n_fft, std::optional<int64_t> hop_length, std::optional<int64_t> win_length,
            const Tensor& window, bool center, const std::string& pad_mode, bool normalized,
            std::optional<bool> onesided, std::optional<bool> return_complex, std::optional<bool> align_to_window) {
  const char* op = "stft";
  KILN_CHECK(!(center && align_to_window.has_value()), Runtime, op,
             "stft align_to_window should only be set when center = false");
  const bool ret_complex =
      return_complex.value_or(self.is_complex() || (window.defined() && window.is_complex()));
  KILN_CHECK(ret_complex || return_complex.has_value(), Runtime, op,
             "stft requires the return_complex parameter be given for real inputs, and will further require that "
             "return_complex=True in a future PyTorch release.");
  const int64_t hop = hop_length.value_or(n_fft >> 2), win = win_length.value_or(n_fft);
  const std::string where = call_str(op, self, n_fft, hop, win, window);
  KILN_CHECK(self.dim() == 1 || self.dim() == 2, Runtime, op, where, "expected a 1D or 2D tensor");
  KILN_CHECK(is_floating(self.dtype()) || is_complex(self.dtype()), Runtime, op, where,
             "expected a tensor of floating point or complex values");
  const Dtype rdt = is_complex(self.dtype()) ? (self.dtype() == kComplex128 ? kFloat64 : kFloat32) : self.dtype();
  KILN_CHECK(rdt == kFloat32 || rdt == kFloat64, Runtime, op, "MKL FFT doesn't support tensors of type: ",
             shape_detail::torch_type_name(self.dtype()));
  Tensor x = self.dim() == 1 ? unsqueeze(self, 0) : self;
  if (center) {  // n_fft / 2 on each side, torch pads (B, 1, L)
    const int64_t p = n_fft / 2;
    x = squeeze(pad(unsqueeze(x, 1), {p, p}, pad_mode), Shape{1});
  }
  const int64_t len = x.sizes()[1];
  KILN_CHECK(n_fft > 0 && n_fft <= len, Runtime, op, where, "expected 0 < n_fft < ", len, ", but got n_fft=", n_fft);
  KILN_CHECK(hop > 0, Runtime, op, where, "expected hop_length > 0, but got hop_length=", hop);
  KILN_CHECK(win > 0 && win <= n_fft, Runtime, op, where, "expected 0 < win_length <= n_fft, but got win_length=",
             win);
  if (window.defined())
    KILN_CHECK(window.dim() == 1 && window.sizes()[0] == win, Runtime, op, where,
               "expected a 1D window tensor of size equal to win_length=", win, ", but got window with size ",
               shape_list(window.sizes()));
  if (align_to_window.value_or(false) && win < n_fft) {  // frames start where their window does
    const int64_t left = (n_fft - win) / 2;
    x = pad(x, {left, n_fft - win - left});
  }
  Tensor frames = unfold(x, 1, n_fft, hop);  // (B, n_frames, n_fft)
  if (window.defined()) frames = mul(frames, full_window(window, n_fft, win));
  else if (win < n_fft)  // no window: a rectangle of win_length, centred in n_fft (torch's)
    frames = mul(frames, full_window(ones({win}, TensorOptions(rdt)), n_fft, win));
  const bool complex_fft = frames.is_complex();
  const bool one = onesided.value_or(!complex_fft);
  KILN_CHECK(!(complex_fft && one), Runtime, op, where, "Cannot have onesided output if window or input is complex");
  const fft::Norm norm = normalized ? fft::Norm("ortho") : fft::Norm("backward");
  Tensor out = one ? fft::rfft(frames, n_fft, -1, norm) : fft::fft(frames, n_fft, -1, norm);
  out = transpose(out, 1, 2);  // (B, freq, n_frames)
  if (self.dim() == 1) out = squeeze(out, Shape{0});
  return ret_complex ? out : view_as_real(out);
}

Tensor istft(const Tensor& self, int64_t n_fft, std::optional<int64_t> hop_length, std::optional<int64_t> win_length,
             const Tensor& window, bool center, bool normalized, std::optional<bool> onesided,
             std::optional<int64_t> length, bool return_complex) {
  const char* op = "istft";
  const int64_t hop = hop_length.value_or(n_fft >> 2), win = win_length.value_or(n_fft);
  const std::string where = call_str(op, self, n_fft, hop, win, window);
  KILN_CHECK(self.is_complex(), Runtime, op,
             "istft requires a complex-valued input tensor matching the output from stft with return_complex=True.");
  KILN_CHECK(self.dim() == 2 || self.dim() == 3, Runtime, op, where,
             "expected a tensor with 2 or 3 dimensions of complex dtype, but got ", self.dim());
  KILN_CHECK(self.numel() > 0, Runtime, op, where, "input tensor cannot be empty");
  Tensor in = self.dim() == 2 ? unsqueeze(self, 0) : self;  // (B, fft_size, n_frames)
  const int64_t fft_size = in.sizes()[1], n_frames = in.sizes()[2];
  const bool one = onesided.value_or(fft_size != n_fft);
  if (one)
    KILN_CHECK(n_fft / 2 + 1 == fft_size, Runtime, op, where,
               "expected the frequency dimension (3rd to the last) of the input tensor to match n_fft / 2 + 1 when "
               "onesided=True, but got ", fft_size);
  else
    KILN_CHECK(n_fft == fft_size, Runtime, op, where,
               "expected the frequency dimension (3rd to the last) of the input tensor to match n_fft when "
               "onesided=False, but got ", fft_size);
  KILN_CHECK(hop > 0 && hop <= win, Runtime, op, where, "expected 0 < hop_length <= win_length");
  KILN_CHECK(win > 0 && win <= n_fft, Runtime, op, where, "expected 0 < win_length <= n_fft");
  if (window.defined())
    KILN_CHECK(window.dim() == 1 && window.sizes()[0] == win, Runtime, op, where,
               "Invalid window shape. window has to be 1D and length of `win_length`");
  const Dtype rdt = self.dtype() == kComplex128 ? kFloat64 : kFloat32;
  // no window: a rectangle of win_length centred in n_fft; an integral window computes in floats
  Tensor w = full_window(window.defined() ? window : ones({win}, TensorOptions(rdt)), n_fft, win);
  if (!is_floating(w.dtype()) && !is_complex(w.dtype())) w = to_dtype(w, rdt);
  Tensor frames = transpose(in, 1, 2);  // (B, n_frames, fft_size)
  const fft::Norm norm = normalized ? fft::Norm("ortho") : fft::Norm("backward");
  if (return_complex) {
    KILN_CHECK(!one, Runtime, op, where, "Cannot have onesided output if window or input is complex");
    frames = fft::ifft(frames, n_fft, -1, norm);
  } else {
    KILN_CHECK(!w.is_complex(), Runtime, op, where, "Complex windows are incompatible with return_complex=False");
    if (!one) frames = narrow(frames, -1, 0, n_fft / 2 + 1);
    frames = fft::irfft(frames, n_fft, -1, norm);
  }
  Tensor y_frames = mul(frames, w);  // (B, n_frames, n_fft)
  const int64_t out_len = n_fft + hop * (n_frames - 1);
  // overlap-add of the frames and of the squared window (fold sums the columns at their offsets)
  auto overlap_add = [&](const Tensor& f) {  // (B, n_frames, n_fft) -> (B, out_len)
    Tensor cols = transpose(f, 1, 2);  // (B, n_fft, n_frames): fold's (N, C * k, L)
    Tensor r = nn::functional::fold(cols, {1, out_len}, {1, n_fft}, {1, 1}, {0, 0}, {1, hop});
    return reshape(r, {f.sizes()[0], out_len});
  };
  auto overlap_add_any = [&](const Tensor& f) {  // fold is real: a complex signal in two parts
    if (!is_complex(f.dtype())) return overlap_add(f);
    return view_as_complex(stack({overlap_add(contiguous(real(f))), overlap_add(contiguous(imag(f)))}, -1));
  };
  Tensor y = overlap_add_any(y_frames);
  Tensor w2 = mul(w, w);  // (torch's window.pow(2): complex for a complex window)
  Tensor envelope = overlap_add_any(contiguous(expand(reshape(w2, {1, 1, n_fft}), {1, n_frames, n_fft})));
  const int64_t start = center ? n_fft / 2 : 0;
  int64_t end = length ? start + *length : (center ? out_len - n_fft / 2 : out_len);
  const int64_t stop = std::min(end, out_len);
  y = slice(y, 1, start, stop);
  envelope = slice(envelope, 1, start, stop);
  KILN_CHECK(envelope.numel() > 0, Runtime, op, where, "window overlap add min: the envelope is empty");
  const double env_min = amin(abs(envelope)).item<double>();
  KILN_CHECK(env_min >= 1e-11, Runtime, op, where, "window overlap add min: ", env_min);
  y = div(y, envelope);
  if (self.dim() == 2) y = squeeze(y, Shape{0});
  if (end > out_len) y = pad(y, {0, end - out_len});  // a longer `length`: zeros after the signal
  return y;
}

namespace {

Composite c_stft{
    "stft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool center=True, "
    "str pad_mode=\"reflect\", bool normalized=False, bool? onesided=None, bool? return_complex=None, "
    "bool? align_to_window=None) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {stft(in[0], attr<int64_t>(a, 0), opt_attr<int64_t>(a, 1), opt_attr<int64_t>(a, 2), in[1],
                   attr<bool>(a, 3), attr<std::string>(a, 4), attr<bool>(a, 5), opt_attr<bool>(a, 6),
                   opt_attr<bool>(a, 7), opt_attr<bool>(a, 8))};
    },
    kFunctionAndMethod};
Composite c_istft{
    "istft(Tensor self, int n_fft, int? hop_length=None, int? win_length=None, Tensor? window=None, bool center=True, "
    "bool normalized=False, bool? onesided=None, int? length=None, bool return_complex=False) -> Tensor",
    [](const TensorList& in, const Attrs& a) -> TensorList {
      return {istft(in[0], attr<int64_t>(a, 0), opt_attr<int64_t>(a, 1), opt_attr<int64_t>(a, 2), in[1],
                    attr<bool>(a, 3), attr<bool>(a, 4), opt_attr<bool>(a, 5), opt_attr<int64_t>(a, 6),
                    attr<bool>(a, 7))};
    },
    kFunctionAndMethod};

}  // namespace

}  // namespace kiln
