// Differentiable functional collectives (torch.distributed._functional_collectives and
// torch.distributed.nn.functional): each is one op of the table (`_c10d_*`), so autograd, export and
// graph capture see it. They return new tensors and leave their inputs alone. Backward:
//   all_reduce (SUM / AVG)      <-> all_reduce of the gradient (same op)
//   all_gather along dim        <-> reduce_scatter (SUM) along dim
//   reduce_scatter along dim    <-> all_gather along dim (AVG: divided by the group size)
//   all_to_all_single           <-> all_to_all_single with the split sizes swapped
//   broadcast from src          <-> reduce (SUM) to src (zeros on the other ranks); torch has none
//   reduce to dst               <-> broadcast from dst
// A null group is the world; `src` and `dst` are ranks within the group.
#pragma once

#include <string>

#include "kiln/distributed/process_group.h"

namespace kiln::distributed::functional {

Tensor all_reduce(const Tensor& t, const std::string& reduce_op = "sum", const ProcessGroupPtr& g = nullptr);
Tensor all_gather_tensor(const Tensor& t, int64_t gather_dim = 0, const ProcessGroupPtr& g = nullptr);
Tensor reduce_scatter_tensor(const Tensor& t, const std::string& reduce_op = "sum", int64_t scatter_dim = 0,
                             const ProcessGroupPtr& g = nullptr);
// Along dim 0; empty split lists mean equal splits.
Tensor all_to_all_single(const Tensor& t, const Shape& output_split_sizes = {}, const Shape& input_split_sizes = {},
                         const ProcessGroupPtr& g = nullptr);
Tensor broadcast(const Tensor& t, int src, const ProcessGroupPtr& g = nullptr);
Tensor reduce(const Tensor& t, int dst, const std::string& reduce_op = "sum", const ProcessGroupPtr& g = nullptr);

}  // namespace kiln::distributed::functional
