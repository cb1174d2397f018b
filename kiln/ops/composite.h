// Composite ops (torch's CompositeImplicitAutograd): ops written with table ops, so that autograd,
// the modes and the capture layer see only their parts (decision 4). Each has a schema in torch's
// language and declares its public variants like a table op (dispatch/op.h), so a host-language
// binding makes its function, method, in-place method and out= form from the schema; what it lacks
// is a meta, a kernel and a derivative of its own.
//
//   Composite c_lerp{"lerp.Scalar(Tensor self, Tensor end, Scalar weight) -> Tensor",
//                    [](const TensorList& in, const Attrs& a) -> TensorList {
//                      return {lerp(in[0], in[1], attr<Scalar>(a, 0))};
//                    }, kAllVariants};
//
// The function gets its arguments as a table op's kernel does: the tensor arguments as inputs (an
// undefined tensor for a None `Tensor?`), every other argument as one attribute, in schema order.
#pragma once

#include <atomic>
#include <optional>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln {

using CompositeFn = TensorList (*)(const TensorList& in, const Attrs& attrs);

struct Composite {
  const char* schema;
  CompositeFn fn;
  uint8_t variants;          // OpVariant bits (op.h)
  uint32_t number_args = 0;  // bit i: tensor argument i also takes a Python number
  // The in-place form where the op has one of its own (writes into inputs[0], returns it); else
  // the in-place variant writes fn's result into self.
  CompositeFn inplace = nullptr;
  uint32_t tags = 0;  // the OpTag bits that apply to a composite (kOutExactDtype, kDtypeFromOut); see CompositeTags
  mutable std::atomic<const Schema*> parsed{nullptr};

  // Registers itself (a static object, alive for the program's lifetime).
  Composite(const char* schema, CompositeFn fn, uint8_t variants, uint32_t number_args = 0,
            CompositeFn inplace = nullptr);
  Composite(const Composite&) = delete;
  Composite& operator=(const Composite&) = delete;
};

// Declares tags beside a composite's registration: CompositeTags t_prod{c_prod, kDtypeFromOut};
struct CompositeTags {
  CompositeTags(Composite& c, uint32_t tags) { c.tags |= tags; }
};

const std::vector<const Composite*>& registered_composites();
// Its parsed schema (parsed once; a malformed one raises, naming the text).
const Schema& composite_schema(const Composite& c);
// By qualified name ("lerp.Scalar"), or by bare name (its first registered overload).
const Composite* find_composite(std::string_view name);

// One call, with torch's in-place and out= semantics on top of the function's result:
//  - in-place (`inplace`): the result is written into inputs[0], which it must match in shape and
//    into whose dtype it must cast (torch's can_cast); returns {inputs[0]};
//  - out= (`out` given): each result is written into its out tensor (resized when its shape
//    differs, after the same dtype check); refused while grad mode is on and an input requires
//    grad, as torch refuses every out= call then; returns *out.
TensorList call_composite(const Composite& c, const TensorList& in, const Attrs& attrs, TensorList* out = nullptr,
                          bool inplace = false);

// An optional attribute (`T?` in the schema): nullopt for None.
template <class T>
std::optional<T> opt_attr(const Attrs& a, size_t i) {
  if (std::holds_alternative<std::monostate>(a[i])) return std::nullopt;
  return std::get<T>(a[i]);
}

// A factory's `ScalarType? dtype=None, Device? device=None` attributes at i and i + 1 as options
// (None: the default dtype, the CPU); for a *_like function, the tensor's dtype and device where None.
TensorOptions options_attr(const Attrs& a, size_t i);
TensorOptions like_options_attr(const Tensor& t, const Attrs& a, size_t i);
// A new tensor as a factory returns it: requires_grad set when attribute i (`bool requires_grad`) is.
TensorList factory_result(const Tensor& t, const Attrs& a, size_t i);

class Generator;
// A `Generator? generator=None` argument: null for None (the default generator).
inline Generator* generator_attr(const Attrs& a, size_t i) {
  if (std::holds_alternative<std::monostate>(a[i])) return nullptr;
  return reinterpret_cast<Generator*>(static_cast<intptr_t>(std::get<int64_t>(a[i])));
}
inline Attr generator_attr(Generator* g) {
  if (!g) return std::monostate{};
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(g));
}

}  // namespace kiln
