// Export from C++ and run without Python: an LSTM tagger written with kiln's C++ API is exported with
// a dynamic batch and sequence length, saved as an archive, loaded by the standalone runtime and run
// at lengths never seen at export.
//
//   build/kiln_export_lstm [archive path]
#include <cstdio>

#include "kiln/kiln.h"

namespace nn = kiln::nn;
using kiln::Tensor;

struct Tagger : nn::Module {
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::Linear> head;
  Tagger() : Module("Tagger") {
    lstm = register_module("lstm", std::make_shared<nn::LSTM>(16, 32, /*num_layers=*/2, true, /*batch_first=*/true,
                                                              0.0, /*bidirectional=*/true));
    head = register_module("head", std::make_shared<nn::Linear>(64, 5));
  }
  Tensor forward(const Tensor& x) { return head->forward(std::get<0>(lstm->forward(x))); }
};

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "tagger.kiln";
  kiln::manual_seed(0);
  auto model = std::make_shared<Tagger>();
  model->eval();
  // batch (dim 0) and sequence (dim 1) dynamic
  kiln::DynamicShapes dyn{{{0, kiln::Dim("batch")}, {1, kiln::Dim("seq", 1, 4096)}}};
  auto ep = kiln::export_program(
      *model, [&](const kiln::TensorList& in) { return kiln::TensorList{model->forward(in[0])}; },
      {kiln::randn({2, 7, 16})}, dyn);
  kiln::save_program(*ep, path);
  std::printf("%s", ep->str().substr(0, 400).c_str());
  std::printf("...\nsaved %s\n", path.c_str());

  kiln::runtime::Program prog = kiln::runtime::Program::load(path);
  for (auto [b, t] : {std::pair<int64_t, int64_t>{1, 1}, {3, 5}, {4, 257}}) {
    Tensor x = kiln::randn({b, t, 16});
    Tensor y = prog.run({x})[0];
    kiln::NoGradGuard ng;
    const double err = kiln::max(kiln::abs(y - model->forward(x))).item().to_double();
    std::printf("batch %lld, seq %4lld: output (%lld, %lld, %lld), max |runtime - eager| = %g\n", (long long)b,
                (long long)t, (long long)y.size(0), (long long)y.size(1), (long long)y.size(2), err);
    if (err > 1e-5) return 1;
  }
  return 0;
}
