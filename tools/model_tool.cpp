#include "tools/model_tool.hpp"

#include <iostream>

#include "runtime/models/hf_model.hpp"
#include "runtime/safetensors.hpp"

namespace ordo {

int run_model_random(const random_checkpoint_options& options) {
  try {
    const uint64_t bytes = write_random_checkpoint(options);
    const hf_checkpoint ck = read_hf_config(options.out_dir);
    std::cout << "wrote " << options.out_dir << ": " << bytes << " bytes of model.safetensors, family " << ck.family->name
              << " (" << describe(ck.dims) << ")\n";
    return 0;
  } catch (const model_load_error& e) {
    std::cerr << "ordo model random: " << e.what() << "\n";
  } catch (const safetensors_error& e) {
    std::cerr << "ordo model random: " << e.what() << "\n";
  }
  return 2;
}

} // namespace ordo
