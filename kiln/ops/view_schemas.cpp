// The view family's composites with torch's schemas (ops/composite.h): their public forms (functions,
// methods, the Python binding) come from these; the ops themselves are in view.cpp.
#include "kiln/ops/composite.h"
#include "kiln/ops/ops.h"

namespace kiln {

Tensor narrow_symint(const Tensor& x, int64_t dim, SymInt start, SymInt length);  // view.cpp

namespace {
#define KILN_C(schema, variants, body)                                                            \
  Composite KILN_CONCAT(c_view_, __LINE__) {                                                       \
    schema, [](const TensorList& in, const Attrs& a) -> TensorList { (void)a; return body; }, variants \
  }
#define KILN_CONCAT2(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT2(a, b)
int64_t i64(const Attrs& a, size_t i) { return attr<int64_t>(a, i); }
const Shape& ints(const Attrs& a, size_t i) { return attr<Shape>(a, i); }

// view(size) and view(dtype): the sizes first (a dtype is no int list, so it falls through)
KILN_C("view(Tensor self, SymInt[] size) -> Tensor", kMethodVariant, {view(in[0], ints(a, 0))});
KILN_C("view.dtype(Tensor self, ScalarType dtype) -> Tensor", kMethodVariant, {view_dtype(in[0], attr<Dtype>(a, 0))});
KILN_C("view_as(Tensor self, Tensor other) -> Tensor", kMethodVariant, {view(in[0], in[1].sizes())});
KILN_C("reshape(Tensor self, SymInt[] shape) -> Tensor", kFunctionAndMethod, {reshape(in[0], ints(a, 0))});
KILN_C("reshape_as(Tensor self, Tensor other) -> Tensor", kMethodVariant, {reshape(in[0], in[1].sizes())});
KILN_C("transpose.int(Tensor self, int dim0, int dim1) -> Tensor", kFunctionAndMethod,
       {transpose(in[0], i64(a, 0), i64(a, 1))});
KILN_C("swapaxes(Tensor self, int axis0, int axis1) -> Tensor", kFunctionAndMethod,
       {transpose(in[0], i64(a, 0), i64(a, 1))});
KILN_C("swapdims(Tensor self, int dim0, int dim1) -> Tensor", kFunctionAndMethod,
       {transpose(in[0], i64(a, 0), i64(a, 1))});
KILN_C("t(Tensor self) -> Tensor", kFunctionAndMethod, {t(in[0])});
KILN_C("adjoint(Tensor self) -> Tensor", kFunctionAndMethod, {conj(mT(in[0]))});
KILN_C("expand_as(Tensor self, Tensor other) -> Tensor", kMethodVariant, {expand_as(in[0], in[1])});
KILN_C("broadcast_to(Tensor self, SymInt[] size) -> Tensor", kFunctionAndMethod, {broadcast_to(in[0], ints(a, 0))});
KILN_C("narrow(Tensor self, int dim, SymInt start, SymInt length) -> Tensor", kFunctionAndMethod,
       {narrow_symint(in[0], i64(a, 0), SymInt::from_raw(i64(a, 1)), SymInt::from_raw(i64(a, 2)))});
KILN_C("select.int(Tensor self, int dim, SymInt index) -> Tensor", kFunctionAndMethod,
       {select(in[0], i64(a, 0), i64(a, 1))});
KILN_C("squeeze(Tensor self) -> Tensor", kFunctionAndMethod, {squeeze(in[0])});
KILN_C("squeeze.dim(Tensor self, int dim) -> Tensor", kFunctionAndMethod, {squeeze(in[0], Shape{i64(a, 0)})});
KILN_C("squeeze.dims(Tensor self, int[] dim) -> Tensor", kFunctionAndMethod, {squeeze(in[0], ints(a, 0))});
KILN_C("flatten.using_ints(Tensor self, int start_dim=0, int end_dim=-1) -> Tensor", kFunctionAndMethod,
       {flatten(in[0], i64(a, 0), i64(a, 1))});
KILN_C("ravel(Tensor self) -> Tensor", kFunctionAndMethod, {reshape(in[0], {-1})});
KILN_C("unflatten.int(Tensor self, int dim, SymInt[] sizes) -> Tensor", kFunctionAndMethod,
       {unflatten(in[0], i64(a, 0), ints(a, 1))});
KILN_C("diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor", kFunctionAndMethod,
       {diagonal(in[0], i64(a, 0), i64(a, 1), i64(a, 2))});
KILN_C("as_strided(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor",
       kFunctionAndMethod, {as_strided(in[0], ints(a, 0), ints(a, 1), opt_attr<int64_t>(a, 2))});
KILN_C("unfold(Tensor self, int dimension, int size, int step) -> Tensor", kMethodVariant,
       {unfold(in[0], i64(a, 0), i64(a, 1), i64(a, 2))});
KILN_C("movedim.intlist(Tensor self, int[] source, int[] destination) -> Tensor", kFunctionAndMethod,
       {movedim(in[0], ints(a, 0), ints(a, 1))});
KILN_C("movedim.int(Tensor self, int source, int destination) -> Tensor", kFunctionAndMethod,
       {movedim(in[0], Shape{i64(a, 0)}, Shape{i64(a, 1)})});
KILN_C("moveaxis.int(Tensor self, int source, int destination) -> Tensor", kFunctionAndMethod,
       {movedim(in[0], Shape{i64(a, 0)}, Shape{i64(a, 1)})});
KILN_C("moveaxis.intlist(Tensor self, int[] source, int[] destination) -> Tensor", kFunctionAndMethod,
       {movedim(in[0], ints(a, 0), ints(a, 1))});
KILN_C("chunk(Tensor self, int chunks, int dim=0) -> Tensor[]", kFunctionAndMethod, chunk(in[0], i64(a, 0), i64(a, 1)));
KILN_C("unbind.int(Tensor self, int dim=0) -> Tensor[]", kFunctionAndMethod, unbind(in[0], i64(a, 0)));
KILN_C("real(Tensor self) -> Tensor", kFunctionVariant, {real(in[0])});
KILN_C("imag(Tensor self) -> Tensor", kFunctionVariant, {imag(in[0])});
KILN_C("conj(Tensor self) -> Tensor", kFunctionAndMethod, {conj(in[0])});
#undef KILN_C
#undef KILN_CONCAT
#undef KILN_CONCAT2
}  // namespace

}  // namespace kiln
