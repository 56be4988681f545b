// kvtune calibrate DIR --k SPEC --v SPEC --out OUT [--granularity layer|head] [--percentile P]
//                  [--margin M] [--samples I,...] [--model-type TYPE] [--tp N] [--json]
// Fits static K/V scales on a capture directory the way the calibration tools do and writes them
// in the layouts the runtimes load (docs/real-caches.md, "Calibrated scales"). OUT is built in a
// temporary sibling and renamed into place, so a failure leaves nothing behind.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>

#include "commands.h"
#include "kvtune/capture.h"
#include "kvtune/capture_scales.h"
#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/kv_scale_files.h"
#include "plugins.h"

namespace kvtune::cli {
namespace {

namespace fs = std::filesystem;

struct CalibrateOptions {
  std::string dir, k = "fp8:format=e4m3,scale=calibrated", v = "fp8:format=e4m3,scale=calibrated", out;
  std::string granularity = "layer";
  double percentile = 100.0, margin = 1.0;
  std::vector<int64_t> samples;
  std::string model_type;
  int64_t tp = 1;
  bool json = false;
};

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomic(path.string(), std::as_bytes(std::span(text.data(), text.size())));
}

int run(const CalibrateOptions& o) {
  if (fs::exists(o.out)) throw InputError("--out " + o.out + " exists; give a new directory");
  require_writable(o.out);  // its parent must be a writable directory, checked before the fit
  const Capture capture = open_capture(o.dir);
  const Registry& registry = command_registry();
  const SchemePtr k = registry.make(o.k), v = registry.make(o.v);
  ScaleFitOptions fit;
  fit.granularity = o.granularity == "head" ? ScaleGranularity::head : ScaleGranularity::layer;
  fit.percentile = o.percentile;
  fit.margin = o.margin;
  fit.samples = o.samples;
  for (const SchemePtr& s : {k, v}) {
    const std::optional<DeviceFormat> f = s->device_format();
    if (!f || f->kind != CodecKind::fp8_e4m3) {
      throw InputError("'" + s->spec() + "': the runtimes load static scales for FP8 E4M3 caches; give an fp8 "
                       "format=e4m3 scheme with scale=calibrated");
    }
  }
  const CaptureScales scales = fit_capture_scales(capture, *k, *v, fit);

  // Everything is written into a sibling first and renamed at the end.
  const fs::path out = fs::absolute(o.out);
  const fs::path staging = out.parent_path() / ("." + out.filename().string() + ".partial");
  try {
    fs::remove_all(staging);
    fs::create_directories(staging);
  } catch (const fs::filesystem_error& e) {
    throw InputError("--out " + o.out + ": cannot create " + staging.string() + ": " + e.code().message());
  }
  try {
    const std::vector<std::byte> tensors = checkpoint_kv_scales(scales);
    write_file_atomic((staging / "kv_scales.safetensors").string(), tensors);
    write_text(staging / "quantization_config.json", checkpoint_quantization_config(scales));
    std::string why;
    const std::optional<std::string> sglang = sglang_quantization_params(scales, o.model_type, o.tp, why);
    if (sglang) write_text(staging / "sglang_kv_scales.json", *sglang);
    std::error_code moved;
    fs::rename(staging, out, moved);
    if (moved) throw InputError("--out " + o.out + ": cannot rename " + staging.string() + " to it: " + moved.message());

    if (o.json) {
      nlohmann::json doc = {{"capture", o.dir},
                            {"k", scales.k_spec},
                            {"v", scales.v_spec},
                            {"granularity", o.granularity},
                            {"percentile", scales.percentile},
                            {"margin", scales.margin},
                            {"files", {"kv_scales.safetensors", "quantization_config.json"}},
                            {"sglang", sglang ? nlohmann::json("sglang_kv_scales.json") : nlohmann::json(nullptr)},
                            {"sglang_not_written", sglang ? nlohmann::json(nullptr) : nlohmann::json(why)}};
      if (sglang) doc["files"].push_back("sglang_kv_scales.json");
      nlohmann::json layers = nlohmann::json::array();
      for (const LayerScales& l : scales.layers) {
        layers.push_back({{"layer", l.layer}, {"k_scale", l.k}, {"v_scale", l.v}, {"k_heads", l.k_heads}, {"v_heads", l.v_heads}});
      }
      doc["layers"] = layers;
      std::cout << doc.dump(2) << "\n";
      return 0;
    }
    std::cout << "scales fitted on " << o.dir << " (" << capture.model << "): K " << scales.k_spec << ", V "
              << scales.v_spec << ", per " << o.granularity << ", percentile " << scales.percentile << ", margin "
              << scales.margin << "\n\n  layer      k_scale      v_scale\n";
    for (const LayerScales& l : scales.layers) {
      char line[96];
      std::snprintf(line, sizeof line, "  %5lld  %11.6g  %11.6g\n", static_cast<long long>(l.layer), l.k, l.v);
      std::cout << line;
    }
    std::cout << "\nwritten to " << o.out << ":\n"
              << "  kv_scales.safetensors     model.layers.N.self_attn.k_scale / v_scale (llm-compressor's names; vLLM, SGLang)\n"
              << "  quantization_config.json  the quantization_config vLLM needs in the checkpoint's config.json to load them\n";
    if (sglang) {
      std::cout << "  sglang_kv_scales.json     SGLang --quantization-param-path (" << o.tp << " TP rank(s))\n";
    } else {
      std::cout << "  (no SGLang --quantization-param-path file: " << why << ")\n";
    }
    std::cout << "  TensorRT-LLM: not written (its PyTorch backend runs FP8 KV caches with scale 1.0 whatever the "
                 "checkpoint holds; docs/real-caches.md)\n";
    return 0;
  } catch (...) {
    std::error_code ignored;  // the first error is the one to report
    fs::remove_all(staging, ignored);
    throw;
  }
}

}  // namespace

Runner add_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  app.add_option("dir", o->dir, "capture directory (python/kvtune_capture.py)")->required();
  app.add_option("--k", o->k, "key scheme with static scales")->capture_default_str();
  app.add_option("--v", o->v, "value scheme with static scales")->capture_default_str();
  app.add_option("--out", o->out, "output directory (must not exist)")->required();
  app.add_option("--granularity", o->granularity, "one scale per layer (vLLM/SGLang per-tensor) or per KV head")
      ->check(CLI::IsMember({"layer", "head"}))
      ->capture_default_str();
  app.add_option("--percentile", o->percentile, "fit this percentile of |x| instead of the maximum")
      ->check(CLI::Range(1e-6, 100.0))
      ->capture_default_str();
  app.add_option("--margin", o->margin, "multiply each scale by this (>= 1: headroom)")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  app.add_option("--samples", o->samples, "the capture's samples to fit on (default: all)")->delimiter(',');
  app.add_option("--model-type", o->model_type, "config.json model_type, for SGLang's --quantization-param-path file");
  app.add_option("--tp", o->tp, "tensor-parallel ranks SGLang runs with")->check(CLI::Range(int64_t(1), int64_t(1024)))->capture_default_str();
  app.add_flag("--json", o->json, "print the scales as JSON");
  return [o] { return run(*o); };
}

}  // namespace kvtune::cli
