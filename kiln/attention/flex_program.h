// FlexAttention's score_mod / mask_mod as a traced program (kiln/attention/flex.h is the public API).
//
// A modifier (a C++ callable or a Python function) is called once, under a dispatch mode, on data-less
// (meta) 0-dim stand-ins: score (the compute dtype), b, h, q_idx, kv_idx (int64). Every op it calls
// is recorded (the op, which earlier values it read, its attributes); tensors it captured become the
// program's buffers (passed to the attention op as inputs, so gradients reach them) and Python numbers
// its constants. The attention kernel then runs the program on whole tiles with kiln ops: score a
// (bq, bk) tile, q_idx a (bq, 1) column, kv_idx a (1, bk) row, b and h 0-dim; broadcasting does the
// rest. The backward runs it in reverse with the ops' own derivatives (the op table's), for the
// score's gradient and the captured tensors'.
//
// Programs live in a registry (process-wide, deduplicated by their text), so the attention op names
// one by an integer attribute; the same modifier traced twice (a closure made anew each step) maps
// to the same entry.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dispatch/op.h"

namespace kiln::flex {

using ScoreModFn = std::function<Tensor(const Tensor& score, const Tensor& b, const Tensor& h,
                                        const Tensor& q_idx, const Tensor& kv_idx)>;
using MaskModFn =
    std::function<Tensor(const Tensor& b, const Tensor& h, const Tensor& q_idx, const Tensor& kv_idx)>;

struct Program {
  struct Node {
    const OpDef* op = nullptr;
    std::vector<int> in;  // slots; -1: an absent optional input
    Attrs attrs;
    std::vector<int> out;  // slots
  };
  // slots: [0, n_args) the arguments (score, b, h, q_idx, kv_idx, or b, h, q_idx, kv_idx), then
  // n_buffers captured tensors, then the constants, then the nodes' outputs in order.
  int n_args = 0;
  int n_buffers = 0;
  std::vector<Tensor> constants;
  std::vector<Node> nodes;
  int result = -1;  // the slot returned
  int n_slots = 0;
  std::string text;  // one line per node (the registry's key; also what repr shows)

  bool is_score_mod() const { return n_args == 5; }
  // The score returned unchanged (no score_mod): the kernel skips it.
  bool identity() const { return is_score_mod() && result == 0; }
  // Whether a node reads the slot, or the program returns it.
  bool reads(int slot) const;
  // The slots whose value depends on the score or on a buffer that requires a gradient.
  std::vector<bool> active(const std::vector<bool>& buffer_needs) const;
};

struct Traced {
  int64_t id = -1;              // the registry's id
  std::vector<Tensor> buffers;  // the captured tensors, in slot order
};

// Traces a modifier. Raises (naming the op) for what cannot be a program: an in-place op or out= on
// a traced value, reading a traced value's data (item(), a Python bool), a result that is not a
// tensor of the arguments' making.
class Tracer {
 public:
  // n_args 5: a score_mod (score of score_dtype); 4: a mask_mod.
  Tracer(int n_args, Dtype score_dtype);
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;
  const TensorList& args() const;
  Traced finish(const Tensor& result);

 private:
  struct State;
  std::shared_ptr<State> st_;
};

Traced trace_score_mod(const ScoreModFn& f, Dtype score_dtype = kFloat32);
Traced trace_mask_mod(const MaskModFn& f);

// The registered program (raises IndexError for an unknown id).
std::shared_ptr<const Program> program(int64_t id);

// Runs the program: slots[0, n_args) and the buffers' slots are set by the caller (`slots` sized
// n_slots); fills the constants and every node's outputs. Ops run below autograd and the modes.
void run(const Program& p, std::vector<Tensor>& slots);
// The reverse pass: from grad_result (the gradient of the result slot, shaped like it), the gradients
// of the score (slot 0; undefined when the result does not depend on it) and of the buffers whose
// `needs` entry is set (each summed to its buffer's shape; undefined when none flows). `active` is
// p.active(needs).
void backprop(const Program& p, const std::vector<Tensor>& slots, const std::vector<bool>& active,
              const Tensor& grad_result, Tensor& grad_score, std::vector<Tensor>& grad_buffers);

}  // namespace kiln::flex
