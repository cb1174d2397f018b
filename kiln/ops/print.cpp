// repr() like torch's: the same number formatting rules (integer mode, fixed decimals or
// scientific), alignment, line wrapping and summarisation, under torch's print options (precision 4,
// 80 columns, summarised above 1000 elements with 3 edge items by default; set_printoptions).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "kiln/core/convert.h"
#include "kiln/ops/ops.h"

namespace kiln {
namespace {

PrintOptions g_print;

struct Formatter {
  bool floating = false, int_mode = true, sci = false, is_bool = false;
  int width = 1, precision = 4;

  std::string fmt_real(double v) const {
    char buf[64];
    if (is_bool) return v != 0 ? "True" : "False";
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%.0f", v);
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci) std::snprintf(buf, sizeof buf, "%.*e", precision, v);
    else if (int_mode) std::snprintf(buf, sizeof buf, "%.0f.", v);
    else std::snprintf(buf, sizeof buf, "%.*f", precision, v);
    return buf;
  }
};

Formatter make_formatter(const std::vector<double>& vals, Dtype d) {
  Formatter f;
  f.precision = g_print.precision;
  f.is_bool = d == kBool;
  f.floating = is_floating(d) || is_complex(d);
  if (f.floating) {
    double mx = 0, mn = INFINITY;
    bool any = false;
    for (double v : vals) {
      if (!std::isfinite(v)) continue;
      if (v != std::ceil(v)) f.int_mode = false;
      double a = std::fabs(v);
      if (a == 0) continue;
      any = true;
      mx = std::max(mx, a);
      mn = std::min(mn, a);
    }
    if (g_print.sci_mode) {
      f.sci = *g_print.sci_mode;
    } else if (any) {
      if (f.int_mode) f.sci = mx / mn > 1000.0 || mx > 1.0e8;
      else f.sci = mx / mn > 1000.0 || mx > 1.0e8 || mn < 1.0e-4;
    }
  }
  // torch's width: over every value of an integer or bool tensor, over the nonzero finite ones of a
  // floating tensor (nan, inf and zeros are padded to it, or printed whole where longer)
  for (double v : vals)
    if (!f.floating || (std::isfinite(v) && v != 0))
      f.width = std::max<int>(f.width, static_cast<int>(f.fmt_real(v).size()));
  return f;
}

struct Printer {
  const Tensor& t;
  bool summarize;
  Formatter fr, fi;  // real / imaginary parts
  bool cx;

  double real_at(const char* p) const {
    return visit_all(t.dtype(), "repr", [&]<class T>() -> double {
      T v = *reinterpret_cast<const T*>(p);
      if constexpr (is_complex_v<T>) return v.real();
      else return convert<double>(v);
    });
  }
  double imag_at(const char* p) const {
    return visit_all(t.dtype(), "repr", [&]<class T>() -> double {
      if constexpr (is_complex_v<T>) return reinterpret_cast<const T*>(p)->imag();
      else return 0.0;
    });
  }
  // An integer element exactly (through a double, int64 values beyond 2^53 printed rounded).
  std::string int_at(const char* p) const {
    return visit_all(t.dtype(), "repr", [&]<class T>() -> std::string {
      if constexpr (std::is_integral_v<T>) return std::to_string(*reinterpret_cast<const T*>(p));
      else return fr.fmt_real(real_at(p));
    });
  }
  std::string elem(const char* p) const {
    std::string s = !fr.floating && !fr.is_bool ? int_at(p) : fr.fmt_real(real_at(p));
    std::string r = std::string(s.size() < static_cast<size_t>(fr.width) ? fr.width - s.size() : 0, ' ') + s;
    if (!cx) return r;
    std::string is = fi.fmt_real(imag_at(p));  // torch: imaginary part unpadded, sign kept
    return r + (is[0] == '-' || is[0] == '+' ? "" : "+") + is + "j";
  }
  void collect(const char* p, int64_t d, std::vector<double>& re, std::vector<double>& im) const {
    if (d == t.dim()) {
      re.push_back(real_at(p));
      if (cx) im.push_back(imag_at(p));
      return;
    }
    int64_t n = t.sizes()[d], st = t.strides()[d] * static_cast<int64_t>(t.itemsize());
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * g_print.edgeitems && i == g_print.edgeitems) i = n - g_print.edgeitems;
      collect(p + i * st, d + 1, re, im);
    }
  }
  std::string rec(const char* p, int64_t d, int indent) const {
    if (d == t.dim()) return elem(p);
    int64_t n = t.sizes()[d], st = t.strides()[d] * static_cast<int64_t>(t.itemsize());
    std::string out = "[";
    bool last = d == t.dim() - 1;
    if (last) {  // torch's _vector_str: " ..." counts as an element when lines are filled
      int elen = fr.width + 2 + (cx ? fi.width + 1 : 0);
      int per_line = std::max(1, (g_print.linewidth - indent) / elen);
      std::vector<std::string> data;
      for (int64_t i = 0; i < n; ++i) {
        if (summarize && n > 2 * g_print.edgeitems && i == g_print.edgeitems) {
          data.push_back(" ...");
          i = n - g_print.edgeitems;
        }
        data.push_back(elem(p + i * st));
      }
      for (size_t i = 0; i < data.size(); ++i) {
        if (i > 0) out += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
        out += data[i];
      }
    } else {
      std::string sep = "," + std::string(t.dim() - d - 1, '\n') + std::string(indent + 1, ' ');
      for (int64_t i = 0; i < n; ++i) {
        if (summarize && n > 2 * g_print.edgeitems && i == g_print.edgeitems) {
          out += "..." + sep;
          i = n - g_print.edgeitems;
        }
        out += rec(p + i * st, d + 1, indent + 1);
        if (i + 1 < n) out += sep;
      }
    }
    return out + "]";
  }
};

}  // namespace

const PrintOptions& print_options() { return g_print; }
void set_print_options(const PrintOptions& o) {
  KILN_CHECK(o.precision >= 0 && o.edgeitems >= 0 && o.linewidth > 0, Value, "set_printoptions",
             "precision and edgeitems must be non-negative and linewidth positive, got precision=", o.precision,
             ", edgeitems=", o.edgeitems, ", linewidth=", o.linewidth);
  g_print = o;
}

std::string repr(const Tensor& t) {
  std::ostringstream os;
  if (t.is_meta()) {  // no data: sizes, and the dtype unless it is the default one (torch's form)
    os << "tensor(..., device='meta', size=(";
    for (int64_t i = 0; i < t.dim(); ++i) os << (i ? ", " : "") << t.sizes()[i];
    if (t.dim() == 1) os << ",";
    os << ")";
    if (t.dtype() != default_dtype()) os << ", dtype=kiln." << dtype_name(t.dtype());
    os << ")";
    return os.str();
  }
  std::string prefix = "tensor(";
  Dtype d = t.dtype();
  bool show_dtype = !(d == default_dtype() || d == kInt64 || d == kBool ||
                      d == (default_dtype() == kFloat64 ? kComplex128 : kComplex64));
  if (t.numel() == 0) show_dtype = d != default_dtype();  // torch always names it for empty tensors
  std::string body;
  // torch's suffixes: size= for an empty tensor that is not 1-d, dtype= when not implied. Each is
  // measured as torch's text ("dtype=torch.x" is one character longer than kiln's)
  std::vector<std::pair<std::string, size_t>> suffixes;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) {
      std::ostringstream s;
      s << "size=(";
      for (int64_t i = 0; i < t.dim(); ++i) s << (i ? ", " : "") << t.sizes()[i];
      s << ")";
      suffixes.push_back({s.str(), s.str().size()});
    }
  } else {
    Printer pr{t, static_cast<double>(t.numel()) > g_print.threshold, {}, {}, is_complex(d)};
    std::vector<double> re, im;
    pr.collect(static_cast<const char*>(t.data_ptr()), 0, re, im);
    pr.fr = make_formatter(re, d);
    if (pr.cx) pr.fi = make_formatter(im, d);
    body = pr.rec(static_cast<const char*>(t.data_ptr()), 0, static_cast<int>(prefix.size()));
  }
  if (show_dtype) {
    std::string dt = "dtype=kiln." + std::string(dtype_name(d));
    suffixes.push_back({dt, dt.size() + 1});
  }
  // torch's _add_suffixes: a suffix starts a new line when the last one would pass the line width
  std::string out = prefix + body;
  size_t nl = out.rfind('\n');
  int64_t last = nl == std::string::npos ? static_cast<int64_t>(out.size()) + 2 : static_cast<int64_t>(out.size() - nl) + 1;
  for (const auto& [text, len] : suffixes) {
    if (last + static_cast<int64_t>(len) + 2 > g_print.linewidth) {
      out += ",\n" + std::string(prefix.size(), ' ') + text;
      last = static_cast<int64_t>(prefix.size() + len);
    } else {
      out += ", " + text;
      last += static_cast<int64_t>(len) + 2;
    }
  }
  os << out << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << repr(t); }

}  // namespace kiln
