// Loads the plugin named on the command line into the built-in registry, prints one scheme's
// measured bits per element and runs check_plugin (the code behind `kvtune check-plugin`).
#include <iostream>

#include "kvtune/builtin.h"
#include "kvtune/conformance.h"
#include "kvtune/error.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kvtune_consumer PLUGIN\n";
    return 2;
  }
  try {
    const kvtune::Registry registry = kvtune::registry_with_plugins({argv[1]});
    const kvtune::SchemePtr s = registry.make("nf4:group=32,scale=f16");
    std::cout << s->spec() << " bits/element at 64x128: " << s->bits_per_element(64, 128) << "\n";
    return kvtune::conformance::check_plugin(argv[1], kvtune::builtin_registry(), std::cout);
  } catch (const kvtune::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}
