// A hook on Tensor::item(), the one place C++ reads a tensor's value into a number: vmap's trace sets
// it (kiln/func/vmap.cpp) so that a value differing per example is never read from the first example
// alone. Null (the default): nothing runs.
#pragma once

namespace kiln {

class Tensor;
namespace detail {
extern thread_local void (*item_read_hook)(const Tensor& t);
}  // namespace detail

}  // namespace kiln
