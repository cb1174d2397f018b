// torch.nn.utils.rnn's packed sequences: packing and padding as index gathers (differentiable with
// respect to the data), and the recurrent layers over a PackedSequence (kiln/nn/rnn.cpp's
// RNNBase::run_packed) as one fused layer call per run of equal batch size.
#include <algorithm>

#include "kiln/core/format.h"
#include "kiln/nn/utils.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/sort.h"
#include "kiln/core/stream.h"

namespace kiln::nn::utils::rnn {
namespace {

std::vector<int64_t> to_vec(const Tensor& t) {
  Tensor c = t.to(kInt64).contiguous();
  stream_detail::before_host_read();
  const int64_t* p = static_cast<const int64_t*>(c.data_ptr());
  return std::vector<int64_t>(p, p + c.numel());
}
Tensor from_vec(const std::vector<int64_t>& v) {
  Tensor t = empty({static_cast<int64_t>(v.size())}, TensorOptions(kInt64));
  std::copy(v.begin(), v.end(), static_cast<int64_t*>(t.data_ptr()));
  return t;
}

}  // namespace

Tensor invert_permutation(const Tensor& permutation) {
  if (!permutation.defined()) return {};
  return scatter(empty_like(permutation), 0, permutation, arange(0, permutation.numel(), 1, TensorOptions(kInt64)));
}

PackedSequence pack_padded_sequence(const Tensor& input_in, const Tensor& lengths_in, bool batch_first,
                                    bool enforce_sorted) {
  const char* op = "pack_padded_sequence";
  KILN_CHECK(lengths_in.dim() == 1, Runtime, op, "'lengths' argument should be a 1D CPU int64 tensor, but got ",
             lengths_in.dim(), "D ", dtype_name(lengths_in.dtype()), " tensor");
  Tensor lengths = lengths_in.to(kInt64), input = input_in, sorted;
  if (!enforce_sorted) {
    auto [l, idx] = sort(lengths, 0, /*descending=*/true);
    lengths = l, sorted = idx;
    input = index_select(input, batch_first ? 0 : 1, sorted);
  }
  Tensor x = batch_first ? transpose(input, 0, 1) : input;  // (T, B, *)
  KILN_CHECK(x.dim() >= 2, Runtime, op, "expected a padded input of at least 2 dimensions, got ", input.sizes());
  const int64_t T = x.size(0), B = x.size(1);
  std::vector<int64_t> len = to_vec(lengths);
  KILN_CHECK(static_cast<int64_t>(len.size()) == B, Runtime, op, "Expected `len(lengths)` to be equal to batch_size, but got ",
             len.size(), " (batch_size=", B, ")");
  KILN_CHECK(B > 0 && len.back() > 0, Runtime, op,
             "Length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0");
  for (int64_t b = 1; b < B; ++b)
    KILN_CHECK(len[b - 1] >= len[b], Runtime, op,
               "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can pass "
               "`enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep this requirement "
               "if you do not need ONNX exportability.");
  KILN_CHECK(len[0] <= T, Runtime, op, "Expected the longest sequence (", len[0],
             ") to be no longer than the padded input (", T, ")");
  // step t holds the sequences longer than t: rows t * B + b for b < batch_sizes[t]
  std::vector<int64_t> batch_sizes, rows;
  for (int64_t t = 0; t < len[0]; ++t) {
    int64_t n = 0;
    while (n < B && len[n] > t) ++n;
    batch_sizes.push_back(n);
    for (int64_t b = 0; b < n; ++b) rows.push_back(t * B + b);
  }
  Shape flat = x.sizes();
  flat.erase(flat.begin());
  flat[0] = T * B;
  Tensor data = index_select(reshape(x, flat), 0, from_vec(rows));
  return {data, from_vec(batch_sizes), sorted, invert_permutation(sorted)};
}

std::tuple<Tensor, Tensor> pad_packed_sequence(const PackedSequence& seq, bool batch_first, double padding_value,
                                               std::optional<int64_t> total_length) {
  const char* op = "pad_packed_sequence";
  std::vector<int64_t> bs = to_vec(seq.batch_sizes);
  KILN_CHECK(!bs.empty(), Runtime, op, "expected a non-empty batch_sizes");
  int64_t T = static_cast<int64_t>(bs.size());
  if (total_length) {
    KILN_CHECK(*total_length >= T, Value, op,
               "Expected total_length to be at least the length of the longest sequence in input, but got "
               "total_length=", *total_length, " and max sequence length being ", T);
    T = *total_length;
  }
  const int64_t B = bs[0], N = seq.data.size(0);
  // padded position (t, b) reads data row offset[t] + b, or the padding row N
  std::vector<int64_t> map(static_cast<size_t>(T * B), N), lengths(B, 0);
  int64_t offset = 0;
  for (size_t t = 0; t < bs.size(); ++t) {
    for (int64_t b = 0; b < bs[t]; ++b) map[t * B + b] = offset + b, lengths[b] = static_cast<int64_t>(t) + 1;
    offset += bs[t];
  }
  KILN_CHECK(offset == N, Runtime, op, "batch_sizes sum to ", offset, " but data has ", N, " rows");
  Shape row = seq.data.sizes();
  row[0] = 1;
  Tensor src = cat({seq.data, full(row, padding_value, TensorOptions(seq.data.dtype()))}, 0);
  Shape out = seq.data.sizes();
  out[0] = B;
  out.insert(out.begin(), T);
  Tensor padded = reshape(index_select(src, 0, from_vec(map)), out);
  if (batch_first) padded = transpose(padded, 0, 1);
  Tensor len = from_vec(lengths);
  if (seq.unsorted_indices.defined()) {
    padded = index_select(padded, batch_first ? 0 : 1, seq.unsorted_indices);
    len = index_select(len, 0, seq.unsorted_indices);
  }
  return {padded, len};
}

PackedSequence pack_sequence(const TensorList& sequences, bool enforce_sorted) {
  std::vector<int64_t> len;
  for (const Tensor& s : sequences) len.push_back(s.size(0));
  return pack_padded_sequence(pad_sequence(sequences), from_vec(len), false, enforce_sorted);
}

TensorList unpad_sequence(const Tensor& padded, const Tensor& lengths, bool batch_first) {
  Tensor x = batch_first ? padded : transpose(padded, 0, 1);
  std::vector<int64_t> len = to_vec(lengths);
  TensorList out;
  for (size_t b = 0; b < len.size(); ++b) out.push_back(narrow(select(x, 0, static_cast<int64_t>(b)), 0, 0, len[b]));
  return out;
}

TensorList unpack_sequence(const PackedSequence& packed) {
  auto [padded, lengths] = pad_packed_sequence(packed, true);
  return unpad_sequence(padded, lengths, true);
}

}  // namespace kiln::nn::utils::rnn
