// Layer exemptions (vLLM --kv-cache-dtype-skip-layers): some layers keep the model dtype while the
// rest are quantized. Nothing is evaluated twice: a sweep's records carry each sampled layer's
// summaries, so the record of "point P with layers S kept at E" is made from P's per-layer
// summaries and those of the baseline pair (E, E), and the memory model counts each layer with its
// own storage. Which layers: a point's N most damaged sampled layers, ranked by the budget's first
// error metric (rel_out_err without one).
//
// Each sampled layer stands for model_layers / sampled_layers layers of the model (the sample's
// stratum), so the metrics of an exempt sampled layer become a mix: one model layer at E, the rest
// of its stratum still at P. With every layer sampled the mix is the exempt layer itself and the
// means are exact; with a sparse sample the gain is counted for the one layer actually exempt,
// never for the layers it stands for. Means and rates are exact count-weighted averages of the
// mixed per-layer summaries; a mixture has no exact p95 from summaries, so a derived p95 is a bound
// on the side a budget needs (the largest per-layer p95 for a lower-is-better metric, the smallest
// for a higher-is-better one) and max is the largest per-layer max.
#pragma once

#include <cstdint>
#include <vector>

#include "kvtune/metrics.h"
#include "kvtune/sweep.h"
#include "kvtune/sweep_run.h"

namespace kvtune {

// The metric the exempt layers are chosen by.
Metric exemption_metric(const SweepBudget& budget);

// The `count` most damaged of `record`'s sampled layers (model layer indices, ascending); empty
// when the record has no per-layer summaries or fewer than count + 1 layers.
std::vector<int64_t> most_damaged_layers(const SweepRecord& record, Metric metric, int64_t count);

// `base` with `layers` (a subset of its sampled layers) kept at the baseline's dtype: bits are the
// whole model's average over `model_layers` layers, metrics as the header says. `baseline` is the
// record of (exempt, exempt) over the same cases.
SweepRecord exempt_record(const SweepRecord& base, const SweepRecord& baseline, const std::vector<int64_t>& layers,
                          int64_t model_layers, const std::string& exempt);

// `base` with every sliding-window layer of the model kept at the baseline's dtype (vLLM's
// 'sliding_window' pattern): each sampled sliding layer stands for sliding layers only, all of them
// exempt, so it takes the baseline's summaries whole; the other sampled layers keep theirs. Bits
// weigh the model's `sliding_layers` of `model_layers` at the baseline (its memory:
// sweep_analysis.cpp counts each kind of layer with its own storage and window).
SweepRecord sliding_window_record(const SweepRecord& base, const SweepRecord& baseline,
                                  const std::vector<int64_t>& sampled_sliding, int64_t sliding_layers,
                                  int64_t model_layers, const std::string& exempt);

// `records` followed by the derived record of every ok record with per-layer summaries and every
// count of spec.exemption, and with spec.exemption.sliding_window its sliding_window_record where
// some but not all sampled layers slide (duplicates of an evaluated point and the baseline itself
// left out). Nothing is derived without an exemption search or without the baseline's record.
std::vector<SweepRecord> with_layer_exemptions(const SweepSpec& spec, std::vector<SweepRecord> records);

// The model's layer count the bits and memory are weighed over: the preset's, else the workload's.
int64_t model_layer_count(const SweepSpec& spec);

// A derived record's exempt layers as reports list them: "0,31", or "sliding_window (sampled: 0,2)".
std::string exempt_layers_text(const SweepRecord& record);

// How many of the model's layers slide: the preset's count, else the workload's list.
int64_t model_sliding_layer_count(const SweepSpec& spec);

}  // namespace kvtune
