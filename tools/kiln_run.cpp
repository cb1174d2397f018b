// kiln-run: runs an exported program (kiln.export.save / kiln::save_program) with kiln's standalone
// runtime. No Python, no compiler.
//
//   kiln-run model.kiln --input x.safetensors --output y.safetensors [--threads N] [--repeat N]
//   kiln-run model.kiln --info
//
// The input file holds one tensor per user input, named as the program names them (--info lists
// them); the output file gets one tensor per output, "output_0", "output_1", ... (None outputs are
// left out).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "kiln/kiln.h"

namespace {
int usage() {
  std::fprintf(stderr,
               "usage: kiln-run MODEL.kiln --input IN.safetensors --output OUT.safetensors [--threads N] [--repeat N]\n"
               "       kiln-run MODEL.kiln --info\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  std::string model = argv[1], in_path, out_path;
  bool info = false;
  int threads = 0, repeat = 1;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--input") in_path = next();
      else if (a == "--output") out_path = next();
      else if (a == "--threads") threads = std::stoi(next());
      else if (a == "--repeat") repeat = std::max(1, std::stoi(next()));
      else if (a == "--info") info = true;
      else return usage();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kiln-run: %s\n", e.what());
      return 2;
    }
  }
  try {
    if (threads > 0) kiln::set_num_threads(threads);
    const auto t0 = std::chrono::steady_clock::now();
    kiln::runtime::Program prog = kiln::runtime::Program::load(model);
    const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const kiln::ExportedProgram& ep = prog.exported();
    if (info) {
      std::cout << ep.str() << "loaded in " << load_ms << " ms\n";
      return 0;
    }
    if (in_path.empty() || out_path.empty()) return usage();
    kiln::TensorMap given = kiln::load_file(in_path);
    kiln::TensorList inputs;
    for (int k : ep.user_inputs()) {
      const std::string& name = ep.values[ep.inputs[k].value].name;
      auto it = given.find(name);
      if (it == given.end()) {
        std::fprintf(stderr, "kiln-run: %s has no tensor named '%s' (the program's inputs: see --info)\n",
                     in_path.c_str(), name.c_str());
        return 1;
      }
      inputs.push_back(it->second);
    }
    kiln::TensorList outs;
    double best = 1e300;
    for (int r = 0; r < repeat; ++r) {
      const auto s = std::chrono::steady_clock::now();
      outs = prog.run(inputs);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count());
    }
    kiln::TensorMap result;
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].defined()) result["output_" + std::to_string(i)] = outs[i].contiguous();
    kiln::save_file(result, out_path);
    std::fprintf(stderr, "kiln-run: load %.2f ms, run %.3f ms (best of %d)\n", load_ms, best, repeat);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln-run: %s\n", e.what());
    return 1;
  }
}
