// kiln quickstart in C++: the same character-level transformer as examples/quickstart.py, trained
// with kiln's C++ API only (no Python): kiln::nn modules, autograd, AdamW with warmup + cosine,
// a safetensors checkpoint reloaded into a fresh model, then sampled text.
//
//   build/kiln_quickstart [steps] [threads]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "kiln/attention/sdpa.h"
#include "kiln/kiln.h"
#include "kiln/nn/loss.h"
#include "kiln/optim/optim.h"
#include "model.h"

namespace nn = kiln::nn;
using kiln::Tensor;
using quickstart::CharTransformer;

namespace {

std::string load_corpus(const std::string& dir) {
  std::set<std::filesystem::path> seen;
  std::string text;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto real = std::filesystem::canonical(f);
    if (!std::filesystem::is_regular_file(real) || !seen.insert(real).second) continue;
    std::ifstream in(real);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!text.empty()) text += "\n\n";
    text += ss.str();
  }
  return text;
}

struct Data {
  std::vector<char> chars;
  std::map<char, int64_t> stoi;
  Tensor train, val;
  double unigram_entropy = 0;

  explicit Data(const std::string& text) {
    std::set<char> cs(text.begin(), text.end());
    chars.assign(cs.begin(), cs.end());
    for (size_t i = 0; i < chars.size(); ++i) stoi[chars[i]] = static_cast<int64_t>(i);
    Tensor ids = kiln::empty({static_cast<int64_t>(text.size())}, kiln::kInt64);
    int64_t* p = ids.data_ptr<int64_t>();
    std::vector<double> counts(chars.size());
    for (size_t i = 0; i < text.size(); ++i) p[i] = stoi[text[i]];
    int64_t n = static_cast<int64_t>(text.size() * 0.9);
    for (int64_t i = 0; i < n; ++i) counts[p[i]] += 1;
    for (double c : counts)
      if (c > 0) unigram_entropy -= c / n * std::log(c / n);
    train = kiln::narrow(ids, 0, 0, n);
    val = kiln::narrow(ids, 0, n, ids.numel() - n);
  }

  std::pair<Tensor, Tensor> batch(bool is_train, int64_t B, int64_t T, kiln::Generator* g = nullptr) {
    const Tensor& d = is_train ? train : val;
    Tensor starts = kiln::randint(0, d.numel() - T - 1, {B}, kiln::kInt64, g);
    Tensor idx = kiln::add(kiln::unsqueeze(starts, 1), kiln::unsqueeze(kiln::arange(T + 1), 0));
    Tensor chunk = kiln::index(d, {idx});
    return {kiln::narrow(chunk, 1, 0, T), kiln::narrow(chunk, 1, 1, T)};
  }
};

Tensor loss_fn(CharTransformer& m, const Tensor& x, const Tensor& y) {
  Tensor logits = m.forward(x);
  return kiln::F::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
}

double evaluate(CharTransformer& m, Data& data, int batches, int64_t B, int64_t T) {
  kiln::NoGradGuard ng;
  m.eval();
  kiln::Generator g(1234);
  double total = 0;
  for (int i = 0; i < batches; ++i) {
    auto [x, y] = data.batch(false, B, T, &g);
    total += loss_fn(m, x, y).item<double>();
  }
  m.train();
  return total / batches;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = argc > 1 ? std::atoll(argv[1]) : 300;
  if (argc > 2) kiln::set_num_threads(std::atoi(argv[2]));
  const int64_t B = 32, T = 128;
  kiln::manual_seed(0);
  Data data(load_corpus("/usr/share/common-licenses"));
  const int64_t V = static_cast<int64_t>(data.chars.size());
  CharTransformer model(V, T);
  int64_t n_params = 0;
  for (const Tensor& p : model.parameters()) n_params += p.numel();
  std::printf("kiln quickstart (C++): character-level transformer, %.2f M parameters, vocabulary %lld\n",
              n_params / 1e6, static_cast<long long>(V));
  std::printf("  unigram entropy of the text: %.3f nats/char\n", data.unigram_entropy);

  kiln::optim::AdamW opt(model.parameters(),
                         kiln::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).weight_decay(0.1));
  const int64_t warmup = std::max<int64_t>(1, steps / 20);
  kiln::optim::LambdaLR sched(opt, {[&](int64_t s) {
                                if (s < warmup) return (s + 1.0) / warmup;
                                double t = double(s - warmup) / std::max<int64_t>(1, steps - warmup);
                                return 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * t));
                              }});
  std::printf("  validation loss before training: %.3f\n", evaluate(model, data, 4, B, T));
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 1; step <= steps; ++step) {
    auto [x, y] = data.batch(true, B, T);
    Tensor loss = loss_fn(model, x, y);
    opt.zero_grad();
    loss.backward();
    nn::utils::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched.step();
    if (step % 5 == 0 || step == steps) {
      double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      double eta = el / step * (steps - step);
      int done = static_cast<int>(28 * step / steps);
      std::printf("\r  step %4lld/%lld [%s%s] loss %6.3f | %5.1fk tok/s | ETA %d:%02d", static_cast<long long>(step),
                  static_cast<long long>(steps), std::string(done, '#').c_str(), std::string(28 - done, '-').c_str(),
                  loss.item<double>(), step * B * T / el / 1000, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
      std::fflush(stdout);
    }
  }
  double val = evaluate(model, data, 8, B, T);
  std::printf("\n  validation loss %.3f nats/char (unigram entropy %.3f)\n", val, data.unigram_entropy);

  std::filesystem::create_directories("build");
  const std::string path = "build/quickstart_cpp.safetensors";
  kiln::save_file(model.state_dict(), path, {{"context", std::to_string(T)}});
  CharTransformer fresh(V, T);
  fresh.load_state_dict(kiln::load_file(path));
  std::printf("  saved %s and reloaded it: validation loss %.3f\n", path.c_str(), evaluate(fresh, data, 8, B, T));

  kiln::NoGradGuard ng;
  fresh.eval();
  kiln::manual_seed(7);
  std::string prompt = "This License", text = prompt;
  std::vector<int64_t> ids;
  for (char c : prompt) ids.push_back(data.stoi[c]);
  for (int i = 0; i < 300; ++i) {
    int64_t start = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - T);
    Tensor ctx = kiln::empty({1, static_cast<int64_t>(ids.size()) - start}, kiln::kInt64);
    std::copy(ids.begin() + start, ids.end(), ctx.data_ptr<int64_t>());
    Tensor logits = kiln::select(kiln::select(fresh.forward(ctx), 0, 0), 0, -1) / 0.8;
    auto [vals, idx] = kiln::topk(logits, 10);
    Tensor pick = kiln::multinomial(kiln::softmax(vals, -1), 1);
    int64_t next = kiln::select(idx, 0, pick.item<int64_t>()).item<int64_t>();
    ids.push_back(next);
    text += data.chars[next];
  }
  std::printf("  sample (temperature 0.8, top-k 10):\n\n    %s\n", text.c_str());
  return val < data.unigram_entropy - 0.5 ? 0 : 1;
}
