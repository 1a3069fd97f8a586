// `moetier inspect MODEL [--json]`: what a GGUF model is and where its expert bytes live.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/format.h"
#include "gguf/gguf.h"
#include "model/registry.h"
#include "moe/expert_layout.h"
#include "quant/ggml_type.h"

namespace moetier::cli {
namespace {

using nlohmann::json;

constexpr uint64_t kDirectIoAlign = 4096;  // O_DIRECT needs file offsets on (at least) 4096-byte boundaries
constexpr int kFirstExperts = 4;           // how many experts' offsets to list
constexpr size_t kArrayValues = 64;        // numeric arrays up to this length are shown whole (per-layer keys)

json value_json(const gguf::Value& v) {
  if (v.is_array()) {
    const auto& a = v.as_array();
    json j = {{"type", "array"}, {"elem_type", std::string(gguf::value_type_name(v.elem_type))}, {"count", a.size()}};
    // Per-layer hyperparameters (head_count_kv, sliding_window_pattern, rope sections) are short numeric arrays:
    // their values are the point. Vocabularies and merges are not shown.
    if (v.elem_type != gguf::ValueType::STRING && v.elem_type != gguf::ValueType::ARRAY && a.size() <= kArrayValues) {
      json values = json::array();
      for (const gguf::Value& e : a) values.push_back(value_json(e));
      j["values"] = values;
    }
    return j;
  }
  switch (v.type) {
    case gguf::ValueType::STRING: return v.as_string();
    case gguf::ValueType::BOOL: return v.as_bool();
    case gguf::ValueType::FLOAT32:
    case gguf::ValueType::FLOAT64: return v.as_double();
    case gguf::ValueType::INT8:
    case gguf::ValueType::INT16:
    case gguf::ValueType::INT32:
    case gguf::ValueType::INT64: return v.as_int();
    default: return v.as_uint();
  }
}

json describe(const gguf::GgufModel& m) {
  const auto& md = m.metadata();
  json j;
  j["file"] = m.path().string();
  json shards = json::array();
  uint64_t file_bytes = 0;
  for (const auto& s : m.shards()) {
    shards.push_back({{"path", s.path.string()}, {"bytes", s.file_size}, {"gguf_version", s.version},
                      {"alignment", s.alignment}, {"tensors", s.tensor_indices.size()}});
    file_bytes += s.file_size;
  }
  j["shards"] = shards;
  j["file_bytes"] = file_bytes;
  const std::string arch = md.get_string_or("general.architecture", "");
  j["architecture"] = arch;
  j["name"] = md.get_string_or("general.name", "");

  json hp = json::object();
  if (!arch.empty())
    for (const auto& [k, v] : md.entries())
      if (k.rfind(arch + ".", 0) == 0) hp[k.substr(arch.size() + 1)] = value_json(v);
  j["hyperparameters"] = hp;

  json tok = json::object();
  if (md.has("tokenizer.ggml.model")) {
    tok["model"] = md.get_string("tokenizer.ggml.model");
    tok["pre"] = md.get_string_or("tokenizer.ggml.pre", "");
    const auto* toks = md.find("tokenizer.ggml.tokens");
    tok["n_vocab"] = toks && toks->is_array() ? toks->as_array().size() : 0;
    tok["merges"] = md.has("tokenizer.ggml.merges") ? md.get("tokenizer.ggml.merges").as_array().size() : 0;
    tok["chat_template"] = md.has("tokenizer.chat_template");
  }
  j["tokenizer"] = tok;

  const auto layout = moe::ExpertLayout::from_model(m);
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (tensors, bytes)
  uint64_t n_dense = 0, n_expert_tensors = 0;
  for (const auto& t : m.tensors()) {
    auto& bt = by_type[std::string(quant::type_name(t.type))];
    ++bt.first;
    bt.second += t.n_bytes;
    (moe::ExpertLayout::is_routed_expert_tensor(t.name) ? n_expert_tensors : n_dense)++;
  }
  j["tensors"] = {{"count", m.tensors().size()},
                  {"dense", {{"count", n_dense}, {"bytes", layout.dense_total_bytes()}}},
                  {"routed_experts", {{"count", n_expert_tensors}, {"bytes", layout.expert_total_bytes()}}}};
  json types = json::object();
  for (const auto& [name, cb] : by_type) {
    const auto t = quant::parse_type(name);
    types[name] = {{"tensors", cb.first}, {"bytes", cb.second},
                   {"supported", t ? quant::traits(*t).can_dequantize : false}};
  }
  j["types"] = types;

  json layers = json::array();
  for (const auto& le : layout.layers()) {
    // The stacked tensors of the layer by their name after "blk.N.", in file order: one slice of each per expert.
    json stacked = json::array();
    bool merged = false;
    for (const auto* t : le.stacked) {
      stacked.push_back(t->name.substr(t->name.find(".ffn_") + 1));
      merged = merged || t->name.ends_with(".ffn_gate_up_exps.weight");
    }
    // A shared expert (Qwen3.5, DeepSeek: blk.N.ffn_*_shexp) runs for every token: dense, counted in dense_bytes.
    json shared = json::array();
    const std::string prefix = fmt::format("blk.{}.", le.layer);
    for (const auto& t : m.tensors()) {
      if (t.name.starts_with(prefix) && t.name.find("_shexp") != std::string::npos)
        shared.push_back(t.name.substr(prefix.size()));
    }
    layers.push_back({{"layer", le.layer},
                      {"n_expert", le.n_expert},
                      {"expert_bytes", le.expert_bytes},
                      {"dense_bytes", le.dense_bytes},
                      {"expert_tensors", stacked},
                      {"merged_gate_up", merged},
                      {"shared_expert_tensors", shared}});
  }
  j["moe_layers"] = layers;
  const auto [aligned, all] = layout.aligned_slices(kDirectIoAlign);
  j["expert_slices"] = {{"total", all}, {"aligned_4096", aligned}};
  json first = json::array();
  if (!layout.layers().empty()) {
    const auto& le = layout.layers().front();
    for (int64_t e = 0; e < std::min<int64_t>(kFirstExperts, le.n_expert); ++e) {
      json slices = json::array();
      for (const auto& s : le.slices(e))
        slices.push_back({{"tensor", s.tensor->name}, {"shard", s.shard}, {"offset", s.file_offset},
                          {"bytes", s.n_bytes}});
      first.push_back({{"layer", le.layer}, {"expert", e}, {"slices", slices}});
    }
  }
  j["first_experts"] = first;

  // The weight bytes one decode token reads: every dense tensor except token_embd (one row is looked up; it is
  // read whole only when it doubles as the output matrix, in a model without output.weight), plus, per MoE layer,
  // n_expert_used experts. Decode is bound by reading these: bytes/s of memory over these bytes is the tok/s limit.
  uint64_t embd_bytes = 0;
  std::string embd_type;  // token_embd's weight type ("" without one)
  bool has_output = false;
  for (const auto& t : m.tensors()) {
    if (t.name == "token_embd.weight") {
      embd_bytes += t.n_bytes;
      embd_type = quant::type_name(t.type);
    }
    if (t.name == "output.weight") has_output = true;
  }
  const uint64_t k = arch.empty() ? 0 : md.get_uint_or(arch + ".expert_used_count", 0);
  uint64_t expert_read = 0;
  for (const auto& le : layout.layers())
    expert_read += std::min<uint64_t>(k, static_cast<uint64_t>(le.n_expert)) * le.expert_bytes;
  const uint64_t embd_skipped = has_output ? embd_bytes : 0;
  const uint64_t dense_read = layout.dense_total_bytes() - std::min(embd_skipped, layout.dense_total_bytes());
  // The same bytes by weight type (a kernel's speed depends on it): each dense tensor read, and n_expert_used
  // experts' slices of each stacked tensor.
  std::map<std::string, uint64_t> read_by_type, dense_by_type;
  for (const auto& t : m.tensors()) {
    if (moe::ExpertLayout::is_routed_expert_tensor(t.name) || (has_output && t.name == "token_embd.weight")) continue;
    read_by_type[std::string(quant::type_name(t.type))] += t.n_bytes;
    dense_by_type[std::string(quant::type_name(t.type))] += t.n_bytes;
  }
  for (const auto& le : layout.layers()) {
    const uint64_t used = std::min<uint64_t>(k, static_cast<uint64_t>(le.n_expert));
    for (const auto* t : le.stacked)
      read_by_type[std::string(quant::type_name(t->type))] += used * (t->n_bytes / static_cast<uint64_t>(le.n_expert));
  }
  // A recurrent model's state (qwen35moe: the DeltaNet blocks' delta-rule matrices and convolution windows, 62.8 MiB
  // at Qwen3.5-35B-A3B's shapes, past any L3) is read and written back whole by every decode token, beside the
  // weights; 0 for attention-only models, vocabulary-only files and architectures moetier does not load. Sizing it
  // takes the architecture's hyperparameters: where they do not load (a bad or missing key), inspect still
  // describes the file, with the field null and the reason beside it.
  json state_bytes = 0;
  std::string state_error;
  if (const model::ArchitectureEntry* entry = model::find_architecture(arch);
      entry != nullptr && !m.tensors().empty()) {
    try {
      state_bytes = static_cast<uint64_t>(std::max<int64_t>(entry->summarize(m).recurrent_floats_per_sequence, 0)) *
                    sizeof(float);
    } catch (const std::exception& e) {
      state_bytes = nullptr;
      state_error = e.what();
    }
  }
  j["decode_read_per_token"] = {{"bytes", dense_read + expert_read},
                                {"recurrent_state_bytes", state_bytes},
                                {"by_type", read_by_type},
                                {"dense_by_type", dense_by_type},
                                {"dense_bytes", dense_read},
                                {"expert_bytes", expert_read},
                                {"n_expert_used", k},
                                {"token_embd_bytes", embd_bytes},
                                {"token_embd_type", embd_type},
                                {"token_embd_is_output", !has_output && embd_bytes > 0}};
  if (!state_error.empty()) j["decode_read_per_token"]["recurrent_state_error"] = state_error;
  return j;
}

void print_text(const json& j) {
  fmt::print("model:        {} ({}{})\n", j["file"].get<std::string>(), human_bytes(j["file_bytes"].get<uint64_t>()),
             j["shards"].size() > 1 ? fmt::format(" in {} shards", j["shards"].size()) : "");
  const auto& s0 = j["shards"][0];
  fmt::print("format:       GGUF v{}, alignment {}, {} tensors\n", s0["gguf_version"].get<uint32_t>(),
             s0["alignment"].get<uint64_t>(), j["tensors"]["count"].get<uint64_t>());
  const auto arch = j["architecture"].get<std::string>();
  fmt::print("architecture: {}{}\n", arch.empty() ? "(none: vocabulary-only file)" : arch,
             j["name"].get<std::string>().empty() ? "" : fmt::format("  ({})", j["name"].get<std::string>()));
  if (!j["hyperparameters"].empty()) {
    fmt::print("hyperparameters:\n");
    for (const auto& [k, v] : j["hyperparameters"].items())
      fmt::print("  {:<40} {}\n", k, v.contains("values") ? v["values"].dump() : v.dump());
  }
  const auto& tok = j["tokenizer"];
  if (!tok.empty())
    fmt::print("tokenizer:    {}{}, n_vocab {}{}{}\n", tok["model"].get<std::string>(),
               tok["pre"].get<std::string>().empty() ? "" : " (pre " + tok["pre"].get<std::string>() + ")",
               tok["n_vocab"].get<uint64_t>(),
               tok["merges"].get<uint64_t>() ? fmt::format(", {} merges", tok["merges"].get<uint64_t>()) : "",
               tok["chat_template"].get<bool>() ? ", chat template" : "");
  const auto& ts = j["tensors"];
  const uint64_t dense = ts["dense"]["bytes"], experts = ts["routed_experts"]["bytes"];
  const double total = static_cast<double>(dense + experts);
  auto pct = [total](uint64_t b) { return total > 0 ? 100.0 * static_cast<double>(b) / total : 0.0; };
  fmt::print("tensors:      dense {} tensors {} ({:.1f}%), routed experts {} tensors {} ({:.1f}%)\n",
             ts["dense"]["count"].get<uint64_t>(), human_bytes(dense), pct(dense),
             ts["routed_experts"]["count"].get<uint64_t>(), human_bytes(experts),
             pct(experts));
  fmt::print("by type:\n");
  for (const auto& [name, v] : j["types"].items())
    fmt::print("  {:<8} {:>5} tensors {:>12}{}\n", name, v["tensors"].get<uint64_t>(),
               human_bytes(v["bytes"].get<uint64_t>()), v["supported"].get<bool>() ? "" : "  (not supported yet)");
  if (const auto& rd = j["decode_read_per_token"]; j["tensors"]["count"].get<uint64_t>() > 0)
    fmt::print("per decode token: {} of weights read: dense {} ({}), routed experts {} ({} MoE layers x {})\n",
               human_bytes(rd["bytes"].get<uint64_t>()), human_bytes(rd["dense_bytes"].get<uint64_t>()),
               rd["token_embd_is_output"].get<bool>() ? "token_embd read whole as the output matrix"
                                                      : "token_embd left out: a row lookup",
               human_bytes(rd["expert_bytes"].get<uint64_t>()), j["moe_layers"].size(),
               rd["n_expert_used"].get<uint64_t>());
  if (const auto& rd = j["decode_read_per_token"]; rd.contains("recurrent_state_error"))
    fmt::print("                  recurrent state not sized: {}\n", rd["recurrent_state_error"].get<std::string>());
  else if (const uint64_t state = rd["recurrent_state_bytes"]; state > 0)
    fmt::print("                  and {} of recurrent state read and written back\n", human_bytes(state));
  if (!j["moe_layers"].empty()) {
    fmt::print("per layer:    {:>5} {:>8} {:>14} {:>12}\n", "layer", "experts", "one expert", "dense");
    for (const auto& l : j["moe_layers"])
      fmt::print("              {:>5} {:>8} {:>14} {:>12}\n", l["layer"].get<int64_t>(), l["n_expert"].get<int64_t>(),
                 human_bytes(l["expert_bytes"].get<uint64_t>()), human_bytes(l["dense_bytes"].get<uint64_t>()));
    const auto& l0 = j["moe_layers"][0];
    std::string names;
    for (const auto& n : l0["expert_tensors"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
    fmt::print(
        "expert tensors (layer {}): {}{}\n", l0["layer"].get<int64_t>(), names,
        l0["merged_gate_up"].get<bool>() ? " (gate and up merged: each expert's gate rows, then its up rows)" : "");
    if (!l0["shared_expert_tensors"].empty()) {
      std::string shared;
      for (const auto& n : l0["shared_expert_tensors"]) shared += (shared.empty() ? "" : ", ") + n.get<std::string>();
      fmt::print("shared expert (layer {}): {} (dense: always resident, never in the expert cache)\n",
                 l0["layer"].get<int64_t>(), shared);
    }
    const auto& es = j["expert_slices"];
    fmt::print("expert slices on a 4096-byte boundary: {} of {} (direct I/O can read these into place)\n",
               es["aligned_4096"].get<uint64_t>(), es["total"].get<uint64_t>());
    fmt::print("first experts:\n");
    for (const auto& e : j["first_experts"]) {
      fmt::print("  layer {} expert {}:", e["layer"].get<int64_t>(), e["expert"].get<int64_t>());
      for (const auto& s : e["slices"])
        fmt::print("  {} @{}{} +{}", s["tensor"].get<std::string>(),
                   s["shard"].get<uint32_t>() ? fmt::format("shard{}:", s["shard"].get<uint32_t>()) : "",
                   s["offset"].get<uint64_t>(), s["bytes"].get<uint64_t>());
      fmt::print("\n");
    }
  } else {
    fmt::print("routed experts: none ({})\n", j["tensors"]["count"].get<uint64_t>() == 0 ? "no tensors" : "a dense model");
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "describe a GGUF model: architecture, tensors, where the experts live");
  struct Opts {
    std::string model;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("MODEL,-m,--model", o->model, "GGUF file (for a split model, any shard)")->required();
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->callback([o] {
    gguf::OpenOptions opts;
    opts.map_data = false;  // inspect reads headers only: fast on a 100 GB model
    const auto model = gguf::GgufModel::open(o->model, opts);
    const json j = describe(model);
    if (o->json)
      fmt::print("{}\n", j.dump(2));
    else
      print_text(j);
  });
}

}  // namespace moetier::cli
