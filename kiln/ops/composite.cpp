// The composite registry and a composite call's in-place and out= forms (composite.h).
#include "kiln/ops/composite.h"

#include <mutex>

#include "kiln/autograd/autograd.h"
#include "kiln/dispatch/schema.h"
#include "kiln/ops/ops.h"

namespace kiln {

namespace {
std::vector<const Composite*>& registry() {
  static std::vector<const Composite*> r;
  return r;
}

bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.dim() != b.dim()) return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (!bool(a.sym_size(d) == b.sym_size(d))) return false;
  return true;
}

void check_cast(const char* op, const Tensor& result, const Tensor& target) {
  KILN_CHECK(can_cast(result.dtype(), target.dtype()), Runtime, op, "result type ", dtype_name(result.dtype()),
             " can't be cast to the desired output type ", dtype_name(target.dtype()));
}
}  // namespace

Composite::Composite(const char* s, CompositeFn f, uint8_t v, uint32_t numbers, CompositeFn in_place)
    : schema(s), fn(f), variants(v), number_args(numbers), inplace(in_place) {
  registry().push_back(this);
}

const std::vector<const Composite*>& registered_composites() { return registry(); }

const Schema& composite_schema(const Composite& c) {
  if (const Schema* s = c.parsed.load(std::memory_order_acquire)) return *s;
  static std::mutex mu;
  std::lock_guard<std::mutex> g(mu);
  if (const Schema* s = c.parsed.load(std::memory_order_relaxed)) return *s;
  const Schema* s = new Schema(parse_schema(c.schema));  // lives as long as the registry
  c.parsed.store(s, std::memory_order_release);
  return *s;
}

const Composite* find_composite(std::string_view name) {
  for (const Composite* c : registry())
    if (composite_schema(*c).qualified_name() == name) return c;
  for (const Composite* c : registry())  // a bare name: its first overload
    if (composite_schema(*c).name == name) return c;
  return nullptr;
}

TensorOptions options_attr(const Attrs& a, size_t i) {
  TensorOptions o;
  if (auto d = opt_attr<Dtype>(a, i)) o = o.dtype(*d);
  if (auto d = opt_attr<Device>(a, i + 1)) o = o.device(*d);
  return o;
}
TensorOptions like_options_attr(const Tensor& t, const Attrs& a, size_t i) {
  return TensorOptions(opt_attr<Dtype>(a, i).value_or(t.dtype())).device(opt_attr<Device>(a, i + 1).value_or(t.device()));
}
TensorList factory_result(const Tensor& t, const Attrs& a, size_t i) {
  if (attr<bool>(a, i)) set_requires_grad(t);
  return {t};
}

TensorList call_composite(const Composite& c, const TensorList& in, const Attrs& attrs, TensorList* out,
                          bool inplace) {
  const char* name = composite_schema(c).name.c_str();
  if (!inplace && out) {
    bool any = false;
    if (grad_mode_enabled())
      for (const Tensor& t : in) any |= t.defined() && requires_grad(t);
    KILN_CHECK(!any, Runtime, name, name, "(): functions with out=... arguments don't support automatic "
               "differentiation, but one of the arguments requires grad.");
  }
  if (inplace && c.inplace) return c.inplace(in, attrs);
  TensorList r = c.fn(in, attrs);
  if (inplace) {
    const Tensor& self = in[0];
    KILN_CHECK(same_shape(self, r[0]), Runtime, name, "output with shape ", self.sym_sizes(),
               " doesn't match the broadcast shape ", r[0].sym_sizes());
    check_cast(name, r[0], self);
    copy_(self, r[0]);
    return {self};
  }
  if (!out) return r;
  KILN_CHECK(out->size() == r.size(), Type, name, name, "(): expected ", r.size(), " out tensors, got ", out->size());
  for (size_t i = 0; i < r.size(); ++i) {
    const Tensor& o = (*out)[i];
    KILN_CHECK(o.defined(), Runtime, name, "out tensor is undefined");
    if (c.tags & kOutExactDtype)
      KILN_CHECK(o.dtype() == r[i].dtype(), Runtime, name, "Expected out tensor to have dtype ",
                 dtype_name(r[i].dtype()), ", but got ", dtype_name(o.dtype()), " instead");
    check_cast(name, r[i], o);
    if (!same_shape(o, r[i])) {
      // torch resizes the out tensor (with a warning when it was not empty)
      KILN_CHECK(o.is_contiguous() || o.numel() == 0, Runtime, name, "cannot resize a non-contiguous out tensor of shape ",
                 o.sizes(), " to ", r[i].sizes());
      Tensor fresh = make_tensor(r[i].sym_sizes(), o.dtype(), o.device());
      *o.impl() = *fresh.impl();
    }
    copy_(o, r[i]);
  }
  return *out;
}

}  // namespace kiln
