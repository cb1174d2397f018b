// Attention's row kernels, compiled once per ISA (the "attention" family of the kernel table):
// FlexAttention's fused softmax step (attention_softmax.h).
#include "kiln/backend/cpu/attention_softmax.h"

namespace kiln::cpu::KILN_ISA {

void fill_attention(KernelTable& t) { t.attn_softmax = &attn_softmax_rows; }

}  // namespace kiln::cpu::KILN_ISA
