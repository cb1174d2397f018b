// The collectives as table ops: schema, meta, CPU kernel (a call into the group's MPI thread) and
// derivative. The kernel lives here rather than in kiln/backend/cpu: it moves bytes through MPI and
// computes nothing, and libkiln (where the backends live) does not link MPI.
#include "kiln/distributed/functional.h"

#include "kiln/core/error.h"
#include "kiln/dispatch/op.h"
#include "kiln/ops/ops.h"

namespace kiln::distributed::functional {
namespace {

int group_attr(const Attrs& a, size_t i) { return static_cast<int>(attr<int64_t>(a, i)); }
int gid(const ProcessGroupPtr& g) { return g ? g->id() : world()->id(); }

// ---- all_reduce --------------------------------------------------------------------------------------
SpecList all_reduce_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  reduce_op_from_string(attr<std::string>(a, 0));
  group_by_id(group_attr(a, 1));
  return {{in[0].sizes(), in[0].dtype(), in[0].device()}};
}
void all_reduce_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  copy_(out[0], in[0]);
  group_by_id(group_attr(a, 1))->all_reduce(out[0], reduce_op_from_string(attr<std::string>(a, 0)), /*blocking=*/true)->wait();
}
OpDef op_all_reduce{"_c10d_all_reduce", kNondeterministic, all_reduce_meta, {}};
OpRegistrar reg_all_reduce{op_all_reduce, "_c10d_all_reduce(Tensor self, str reduce_op, int group) -> Tensor"};
KernelRegistrar k_all_reduce{"_c10d_all_reduce", DeviceType::CPU, all_reduce_kernel};
TensorList all_reduce_grad(const GradCtx& c, const TensorList& go) {
  const std::string& op = attr<std::string>(c.attrs, 0);
  ReduceOp r = reduce_op_from_string(op);
  KILN_CHECK(r == ReduceOp::SUM || r == ReduceOp::AVG, NotImplemented, "all_reduce",
             "the derivative of all_reduce with ReduceOp.", reduce_op_name(r), " is not defined (SUM and AVG have one)");
  return {dispatch1(op_all_reduce, {go[0]}, {op, c.attrs[1]})};
}
DerivativeRegistrar d_all_reduce{op_all_reduce, all_reduce_grad, 0, 0};

// ---- all_gather / reduce_scatter along a dimension -----------------------------------------------------
SpecList all_gather_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  int n = group_by_id(group_attr(a, 1))->size();
  KILN_CHECK(in[0].dim() > 0, Value, "all_gather_tensor", "expected a tensor of at least one dimension");
  int64_t d = wrap_dim(attr<int64_t>(a, 0), in[0].dim(), "all_gather_tensor");
  SymShape s = in[0].sizes();
  s[d] = s[d] * n;
  return {{s, in[0].dtype(), in[0].device()}};
}
void all_gather_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  auto g = group_by_id(group_attr(a, 1));
  int64_t d = wrap_dim(attr<int64_t>(a, 0), in[0].dim(), "all_gather_tensor");
  if (d == 0) {
    g->all_gather_into_tensor(out[0], in[0])->wait();
    return;
  }
  Shape s = in[0].sizes();
  Shape stacked = s;
  stacked.insert(stacked.begin(), g->size());
  Tensor tmp = empty(stacked, in[0].dtype());
  g->all_gather_into_tensor(tmp, in[0])->wait();
  copy_(out[0], movedim(tmp, {0}, {d}).reshape(out[0].sizes()));
}
OpDef op_all_gather{"_c10d_all_gather", kNondeterministic, all_gather_meta, {}};
OpRegistrar reg_all_gather{op_all_gather, "_c10d_all_gather(Tensor self, int gather_dim, int group) -> Tensor"};
KernelRegistrar k_all_gather{"_c10d_all_gather", DeviceType::CPU, all_gather_kernel};

SpecList reduce_scatter_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  reduce_op_from_string(attr<std::string>(a, 0));
  int n = group_by_id(group_attr(a, 2))->size();
  KILN_CHECK(in[0].dim() > 0, Value, "reduce_scatter_tensor", "expected a tensor of at least one dimension");
  int64_t d = wrap_dim(attr<int64_t>(a, 1), in[0].dim(), "reduce_scatter_tensor");
  SymShape s = in[0].sizes();
  KILN_CHECK(bool(s[d] % n == 0), Value, "reduce_scatter_tensor", "dimension ", d, " of size ", s[d],
             " does not divide evenly by the group size ", n);
  s[d] = s[d] / n;
  return {{s, in[0].dtype(), in[0].device()}};
}
void reduce_scatter_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  auto g = group_by_id(group_attr(a, 2));
  ReduceOp r = reduce_op_from_string(attr<std::string>(a, 0));
  int64_t d = wrap_dim(attr<int64_t>(a, 1), in[0].dim(), "reduce_scatter_tensor");
  Tensor x = in[0];
  if (d != 0) {  // chunk r of dimension d becomes the r-th contiguous block
    Shape s = x.sizes();
    Shape split = s;
    split[d] = s[d] / g->size();
    split.insert(split.begin() + d, g->size());
    x = movedim(x.reshape(split), {d}, {0}).contiguous();
  }
  g->reduce_scatter_tensor(out[0], x, r)->wait();
}
OpDef op_reduce_scatter{"_c10d_reduce_scatter", kNondeterministic, reduce_scatter_meta, {}};
OpRegistrar reg_reduce_scatter{op_reduce_scatter,
                               "_c10d_reduce_scatter(Tensor self, str reduce_op, int scatter_dim, int group) -> Tensor"};
KernelRegistrar k_reduce_scatter{"_c10d_reduce_scatter", DeviceType::CPU, reduce_scatter_kernel};

TensorList all_gather_grad(const GradCtx& c, const TensorList& go) {
  return {dispatch1(op_reduce_scatter, {go[0]}, {std::string("sum"), c.attrs[0], c.attrs[1]})};
}
DerivativeRegistrar d_all_gather{op_all_gather, all_gather_grad, 0, 0};
TensorList reduce_scatter_grad(const GradCtx& c, const TensorList& go) {
  ReduceOp r = reduce_op_from_string(attr<std::string>(c.attrs, 0));
  KILN_CHECK(r == ReduceOp::SUM || r == ReduceOp::AVG, NotImplemented, "reduce_scatter_tensor",
             "the derivative of reduce_scatter with ReduceOp.", reduce_op_name(r), " is not defined (SUM and AVG have one)");
  Tensor g = dispatch1(op_all_gather, {go[0]}, {c.attrs[1], c.attrs[2]});
  if (r == ReduceOp::AVG) g = div(g, scalar_tensor(Scalar(static_cast<int64_t>(group_by_id(group_attr(c.attrs, 2))->size())), Dtype::Undefined, true));
  return {g};
}
DerivativeRegistrar d_reduce_scatter{op_reduce_scatter, reduce_scatter_grad, 0, 0};

// ---- all_to_all_single ------------------------------------------------------------------------------------
SpecList all_to_all_meta(const OpDef&, const SpecList& in, const Attrs& a) {
  group_by_id(group_attr(a, 2));
  const Shape& os = attr<Shape>(a, 0);
  SymShape s = in[0].sizes();
  KILN_CHECK(!s.empty(), Value, "all_to_all_single", "expected a tensor of at least one dimension");
  if (!os.empty()) {
    SymInt rows = 0;
    for (int64_t v : os) rows = rows + SymInt::from_raw(v);
    s[0] = rows;
  }
  return {{s, in[0].dtype(), in[0].device()}};
}
void all_to_all_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  group_by_id(group_attr(a, 2))->all_to_all_single(out[0], in[0], attr<Shape>(a, 0), attr<Shape>(a, 1))->wait();
}
OpDef op_all_to_all{"_c10d_all_to_all_single", kNondeterministic, all_to_all_meta, {}};
OpRegistrar reg_all_to_all{op_all_to_all,
                           "_c10d_all_to_all_single(Tensor self, SymInt[] output_split_sizes, SymInt[] input_split_sizes, "
                           "int group) -> Tensor"};
KernelRegistrar k_all_to_all{"_c10d_all_to_all_single", DeviceType::CPU, all_to_all_kernel};
TensorList all_to_all_grad(const GradCtx& c, const TensorList& go) {
  return {dispatch1(op_all_to_all, {go[0]}, {c.attrs[1], c.attrs[0], c.attrs[2]})};
}
DerivativeRegistrar d_all_to_all{op_all_to_all, all_to_all_grad, 0, 0};

// ---- broadcast / reduce ---------------------------------------------------------------------------------------
SpecList rooted_meta(const OpDef& op, const SpecList& in, const Attrs& a) {
  size_t k = a.size() - 1;  // the group is the last attribute, the root the one before it
  auto g = group_by_id(group_attr(a, k));
  int64_t root = attr<int64_t>(a, k - 1);
  KILN_CHECK(root >= 0 && root < g->size(), Value, op.name, "root rank ", root, " is not a rank of ", g->describe());
  return {{in[0].sizes(), in[0].dtype(), in[0].device()}};
}
void broadcast_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  copy_(out[0], in[0]);
  group_by_id(group_attr(a, 1))->broadcast(out[0], static_cast<int>(attr<int64_t>(a, 0)))->wait();
}
OpDef op_broadcast{"_c10d_broadcast", kNondeterministic, rooted_meta, {}};
OpRegistrar reg_broadcast{op_broadcast, "_c10d_broadcast(Tensor self, int src, int group) -> Tensor"};
KernelRegistrar k_broadcast{"_c10d_broadcast", DeviceType::CPU, broadcast_kernel};

void reduce_kernel(const OpDef&, const TensorList& in, const Attrs& a, TensorList& out) {
  auto g = group_by_id(group_attr(a, 2));
  int dst = static_cast<int>(attr<int64_t>(a, 1));
  copy_(out[0], in[0]);
  g->reduce(out[0], dst, reduce_op_from_string(attr<std::string>(a, 0)))->wait();
  if (g->rank() != dst) zero_(out[0]);
}
OpDef op_reduce{"_c10d_reduce", kNondeterministic, rooted_meta, {}};
OpRegistrar reg_reduce{op_reduce, "_c10d_reduce(Tensor self, str reduce_op, int dst, int group) -> Tensor"};
KernelRegistrar k_reduce{"_c10d_reduce", DeviceType::CPU, reduce_kernel};

TensorList broadcast_grad(const GradCtx& c, const TensorList& go) {
  return {dispatch1(op_reduce, {go[0]}, {std::string("sum"), c.attrs[0], c.attrs[1]})};
}
DerivativeRegistrar d_broadcast{op_broadcast, broadcast_grad, 0, 0};
TensorList reduce_grad(const GradCtx& c, const TensorList& go) {
  ReduceOp r = reduce_op_from_string(attr<std::string>(c.attrs, 0));
  KILN_CHECK(r == ReduceOp::SUM, NotImplemented, "reduce", "the derivative of reduce with ReduceOp.",
             reduce_op_name(r), " is not defined (SUM has one)");
  return {dispatch1(op_broadcast, {go[0]}, {c.attrs[1], c.attrs[2]})};
}
DerivativeRegistrar d_reduce{op_reduce, reduce_grad, 0, 0};

}  // namespace

Tensor all_reduce(const Tensor& t, const std::string& op, const ProcessGroupPtr& g) {
  return dispatch1(op_all_reduce, {t}, {op, static_cast<int64_t>(gid(g))});
}
Tensor all_gather_tensor(const Tensor& t, int64_t dim, const ProcessGroupPtr& g) {
  return dispatch1(op_all_gather, {t}, {dim, static_cast<int64_t>(gid(g))});
}
Tensor reduce_scatter_tensor(const Tensor& t, const std::string& op, int64_t dim, const ProcessGroupPtr& g) {
  return dispatch1(op_reduce_scatter, {t}, {op, dim, static_cast<int64_t>(gid(g))});
}
Tensor all_to_all_single(const Tensor& t, const Shape& os, const Shape& is, const ProcessGroupPtr& g) {
  return dispatch1(op_all_to_all, {t}, {os, is, static_cast<int64_t>(gid(g))});
}
Tensor broadcast(const Tensor& t, int src, const ProcessGroupPtr& g) {
  return dispatch1(op_broadcast, {t}, {static_cast<int64_t>(src), static_cast<int64_t>(gid(g))});
}
Tensor reduce(const Tensor& t, int dst, const std::string& op, const ProcessGroupPtr& g) {
  return dispatch1(op_reduce, {t}, {op, static_cast<int64_t>(dst), static_cast<int64_t>(gid(g))});
}

}  // namespace kiln::distributed::functional
