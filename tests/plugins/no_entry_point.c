/* A shared library that is not a kvtune plugin: it exports a function, but not the entry point. */
#include "kvtune/plugin_abi.h"

KVTUNE_PLUGIN_EXPORT int kvtune_plugin_describe_misspelled(void) { return KVTUNE_PLUGIN_ABI_MAJOR; }
