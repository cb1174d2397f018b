// Data-parallel training from C++: an MLP wrapped in kiln::distributed::DistributedDataParallel, each
// rank on its own half of the batch; run with
//
//   mpirun -np 2 build/kiln_ddp_example
//
// Every rank ends with the same parameters, and they equal what one process gets on the whole batch
// (checked here: rank 0 trains a plain copy on the full batch and compares).
#include <cstdio>

#include "kiln/distributed/ddp.h"
#include "kiln/kiln.h"

namespace nn = kiln::nn;
namespace dist = kiln::distributed;
using kiln::Tensor;

struct MLP : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  MLP() : Module("MLP") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(8, 32));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(32, 4));
  }
  Tensor forward(const Tensor& x) { return fc2->forward(kiln::tanh(fc1->forward(x))); }
};

int main() {
  try {
    dist::init_process_group();
    const int rank = dist::get_rank(), world = dist::get_world_size();
    kiln::manual_seed(0);
    const Tensor X = kiln::randn({16 * world, 8}), Y = kiln::randn({16 * world, 4});
    kiln::manual_seed(1);
    auto single = std::make_shared<MLP>();
    kiln::manual_seed(100 + rank);  // different on each rank: DDP broadcasts rank 0's parameters
    auto local = std::make_shared<MLP>();
    {
      kiln::NoGradGuard ng;
      if (rank == 0)
        for (size_t i = 0; i < local->parameters().size(); ++i) kiln::copy_(local->parameters()[i], single->parameters()[i]);
    }
    dist::DDPOptions options;
    options.bucket_cap_mb = 0.001;  // several buckets even for this small model
    dist::DistributedDataParallel<MLP> ddp(local, options);
    kiln::optim::SGD opt(local->parameters(), kiln::optim::SGDOptions(0.1).momentum(0.9));
    kiln::optim::SGD ref_opt(single->parameters(), kiln::optim::SGDOptions(0.1).momentum(0.9));
    const Tensor x = X.narrow(0, 16 * rank, 16), y = Y.narrow(0, 16 * rank, 16);
    for (int step = 0; step < 5; ++step) {
      opt.zero_grad();
      Tensor loss = nn::functional::mse_loss(ddp(x), y);
      kiln::backward(kiln::TensorList{loss});
      opt.step();
      ref_opt.zero_grad();
      kiln::backward(kiln::TensorList{nn::functional::mse_loss(single->forward(X), Y)});
      ref_opt.step();
      if (rank == 0) std::printf("step %d: loss on rank 0's half %.5f\n", step, loss.item().to_double());
    }
    double diff = 0;
    for (size_t i = 0; i < local->parameters().size(); ++i)
      diff = std::max(diff, kiln::max(kiln::abs(local->parameters()[i] - single->parameters()[i])).item().to_double());
    std::printf("rank %d of %d: max |DDP - single process on the full batch| = %.3g\n", rank, world, diff);
    dist::destroy_process_group();
    return diff < 1e-5 ? 0 : 1;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    dist::abort_job(1);
  }
}
