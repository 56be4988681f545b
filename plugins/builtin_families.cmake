# The explicit list of built-in scheme families (DESIGN §3): one folder under plugins/ each, and
# the function in it that registers the family. builtin_families.cpp is generated from this list.
set(KVTUNE_BUILTIN_FAMILIES
  "float:register_float_families"
  "int:register_int_family"
  "ggml:register_ggml_families"
  "fp8:register_fp8_family"
  "microscale:register_microscale_families"
  "turboquant:register_turboquant_family"
  "qjl:register_qjl_family"
  "kivi:register_kivi_family"
  "kvquant:register_kvquant_family"
  "tokenint:register_tokenint_family"
)
