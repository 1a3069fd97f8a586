// route_trace v1: the reader against the shared traces, the writer's round trip, and errors that name the line.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "trace/route_trace.h"
#include "trace/trace_fixture.h"
#include "util/error.h"

namespace moetier::test {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_data_rows(const std::string& text) {
  size_t rows = 0, pos = 0;
  bool header_seen = false;
  while (pos < text.size()) {
    size_t e = text.find('\n', pos);
    if (e == std::string::npos) e = text.size();
    const std::string_view line(text.data() + pos, e - pos);
    if (!line.empty() && line[0] != '#') {
      if (header_seen) ++rows;
      header_seen = true;
    }
    pos = e + 1;
  }
  return rows;
}

TEST(RouteTrace, ReadsSharedTraces) {
  for (const auto& path : {qwen_trace(), gptoss_trace()}) {
    SCOPED_TRACE(path.string());
    const trace::RouteTrace t = trace::read_route_trace(path);
    const std::string text = slurp(path);
    EXPECT_EQ(t.rows.size(), count_data_rows(text));
    EXPECT_GT(t.header.n_moe_layers, 0);
    EXPECT_EQ(t.header.layers.size(), static_cast<size_t>(t.header.n_moe_layers));
    EXPECT_FALSE(t.header.arch.empty());
    EXPECT_NE(text.find("arch=" + t.header.arch + " "), std::string::npos);
    for (const auto& l : t.header.layers) EXPECT_GT(l.expert_bytes, 0u);
    for (const auto& r : t.rows) {
      ASSERT_LT(r.layer, t.header.n_moe_layers);
      ASSERT_LT(r.expert, t.header.n_expert);
      ASSERT_LT(r.slot, t.header.n_expert_used);
      // A read row reads exactly one expert of its layer.
      if (r.expert_bytes != 0) ASSERT_EQ(r.expert_bytes, t.header.layers[r.layer].expert_bytes);
    }
  }
}

TEST(RouteTrace, SharedTraceWritesBackByteIdentical) {
  for (const auto& path : {qwen_trace(), gptoss_trace()}) {
    SCOPED_TRACE(path.string());
    const trace::RouteTrace t = trace::read_route_trace(path);
    const auto out = tmp_dir("trace") / ("roundtrip_" + path.filename().string());
    trace::write_route_trace(out, t);
    EXPECT_EQ(slurp(out), slurp(path));
  }
}

TEST(RouteTrace, SyntheticRoundTripIsIdentical) {
  trace::RouteTrace t = synthetic_trace(3, 16, 2, 5, 7, 12345);
  t.rows[1].weight = std::nanf("");
  t.rows[2].residency = trace::Residency::prefetched_hit;
  t.rows[3].expert_bytes = 12345;
  t.rows[4].turn = 2;
  const auto out = tmp_dir("trace") / "synthetic.route.csv";
  {
    trace::RouteTraceWriter w(out, t.header);
    for (const auto& r : t.rows) w.add(r);
    w.close();
  }
  const trace::RouteTrace back = trace::read_route_trace(out);
  EXPECT_EQ(back.header, t.header);
  ASSERT_EQ(back.rows.size(), t.rows.size());
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const auto& a = t.rows[i];
    const auto& b = back.rows[i];
    EXPECT_EQ(a.turn, b.turn);
    EXPECT_EQ(a.phase, b.phase);
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.layer, b.layer);
    EXPECT_EQ(a.slot, b.slot);
    EXPECT_EQ(a.expert, b.expert);
    EXPECT_EQ(a.residency, b.residency);
    EXPECT_EQ(a.expert_bytes, b.expert_bytes);
    if (std::isnan(a.weight)) {
      EXPECT_TRUE(std::isnan(b.weight)) << "row " << i;
    } else {
      EXPECT_EQ(a.weight, b.weight) << "row " << i;  // exact: the writer prints the shortest round-trip text
    }
  }
}

std::string error_of(const std::string& text) {
  try {
    trace::parse_route_trace(text, "bad.csv");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RouteTrace, ErrorsNameFileAndLine) {
  const std::string head =
      "# route_trace v1\n# model=/m.gguf arch=x n_layer=2 n_expert=4 n_expert_used=2\n"
      "# layer=0 expert_bytes=10 dense_bytes=5\n# layer=1 expert_bytes=10 dense_bytes=5\n"
      "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";
  EXPECT_EQ(error_of(head + "0,0,0,0,0,1,0.5,0,10\n"), "");
  EXPECT_EQ(error_of(head + "0,1,3,1,1,3,nan,2,0\n"), "");
  EXPECT_NE(error_of(head + "0,0,0,0,0,9,0.5,0,10\n").find("bad.csv:6: expert 9 out of range"), std::string::npos);
  EXPECT_NE(error_of(head + "0,0,0,0,0,1,0.5,0\n").find("bad.csv:6: expected 9 comma-separated fields"),
            std::string::npos);
  EXPECT_NE(error_of(head + "0,0,0,0,0,1,x,0,10\n").find("bad.csv:6: weight"), std::string::npos);
  EXPECT_NE(error_of(head + "0,3,0,0,0,1,0.5,0,10\n").find("bad.csv:6: phase"), std::string::npos);
  EXPECT_NE(error_of("# route_trace v2\n").find("bad.csv:1: expected '# route_trace v1'"), std::string::npos);
  EXPECT_NE(error_of("# route_trace v1\n# model=/m.gguf arch=x n_layer=2 n_expert=4 n_expert_used=2\n"
                     "# layer=0 expert_bytes=10 dense_bytes=5\n"
                     "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n")
                .find("bad.csv:4: header has no '# layer=1' line"),
            std::string::npos);
  EXPECT_NE(error_of("").find("bad.csv: no CSV header"), std::string::npos);
}

// moetier's `# cache` line: written after the layer lines, read back equal; traces without it (the shared ones)
// read with no cache; bad values name the line.
TEST(RouteTrace, CacheLineRoundTripsAndIsOptional) {
  EXPECT_FALSE(trace::read_route_trace(qwen_trace()).header.cache.has_value());
  trace::RouteTrace t = synthetic_trace(2, 8, 2, 3, 2, 4096);
  t.header.cache = trace::TraceCache{139264, 512, true};
  const auto out = tmp_dir("trace") / "cache_line.route.csv";
  trace::write_route_trace(out, t);
  const std::string text = slurp(out);
  EXPECT_NE(text.find("# layer=1 expert_bytes=4096 dense_bytes=1024\n# cache slot_bytes=139264 n_batch=512 "
                      "cliff_guard=1\nturn,"),
            std::string::npos)
      << text.substr(0, 400);
  const trace::RouteTrace back = trace::read_route_trace(out);
  ASSERT_TRUE(back.header.cache.has_value());
  EXPECT_EQ(*back.header.cache, *t.header.cache);
  EXPECT_EQ(back.header, t.header);

  const std::string head =
      "# route_trace v1\n# model=/m.gguf arch=x n_layer=1 n_expert=4 n_expert_used=2\n"
      "# layer=0 expert_bytes=10 dense_bytes=5\n";
  const std::string csv = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";
  EXPECT_EQ(error_of(head + "# cache slot_bytes=4096 n_batch=8 cliff_guard=0\n" + csv), "");
  EXPECT_NE(error_of(head + "# cache slot_bytes=0 n_batch=8 cliff_guard=1\n" + csv)
                .find("bad.csv:4: expected slot_bytes > 0, n_batch > 0 and cliff_guard 0 or 1"),
            std::string::npos);
  EXPECT_NE(error_of(head + "# cache slot_bytes=4096 n_batch=-1 cliff_guard=1\n" + csv).find("bad.csv:4:"),
            std::string::npos);
  EXPECT_NE(error_of(head + "# cache slot_bytes=4096 n_batch=8 cliff_guard=2\n" + csv).find("bad.csv:4:"),
            std::string::npos);
  EXPECT_NE(error_of(head + "# cache slot_bytes=4096 cliff_guard=1\n" + csv)
                .find("bad.csv:4: expected 'n_batch=' on this header line"),
            std::string::npos);
}

// Found by fuzz_route_trace: a header line after the rows (e.g. two traces concatenated) used to replace the
// header, leaving rows already read outside the new layer and expert ranges that replay indexes by; a repeated
// header line silently overwrote the first. Both are errors naming the line.
TEST(RouteTrace, HeaderLinesComeOnceAndFirst) {
  const std::string model = "# model=/m.gguf arch=x n_layer=2 n_expert=4 n_expert_used=1\n";
  const std::string layers = "# layer=0 expert_bytes=10 dense_bytes=5\n# layer=1 expert_bytes=10 dense_bytes=5\n";
  const std::string csv = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";
  const std::string head = "# route_trace v1\n" + model + layers + csv;
  EXPECT_EQ(error_of(head + "0,0,0,1,0,3,nan,0,10\n# other comments are fine\n"), "");
  EXPECT_NE(error_of(head + "0,0,0,1,0,3,nan,0,10\n# model=/m.gguf arch=x n_layer=1 n_expert=2 n_expert_used=1\n")
                .find("bad.csv:7: header line after the CSV header"),
            std::string::npos);
  EXPECT_NE(error_of(head + "0,0,0,1,0,3,nan,0,10\n# layer=0 expert_bytes=99 dense_bytes=5\n")
                .find("bad.csv:7: header line after the CSV header"),
            std::string::npos);
  EXPECT_NE(error_of(head + "# cache slot_bytes=4096 n_batch=8 cliff_guard=0\n")
                .find("bad.csv:6: header line after the CSV header"),
            std::string::npos);
  EXPECT_NE(error_of("# route_trace v1\n" + model + model + layers + csv).find("bad.csv:3: a second '# model=' line"),
            std::string::npos);
  EXPECT_NE(error_of("# route_trace v1\n" + model + layers + "# layer=1 expert_bytes=1 dense_bytes=1\n" + csv)
                .find("bad.csv:5: a second '# layer=1' line"),
            std::string::npos);
  const std::string cache = "# cache slot_bytes=4096 n_batch=8 cliff_guard=0\n";
  EXPECT_NE(error_of("# route_trace v1\n" + model + layers + cache + cache + csv)
                .find("bad.csv:6: a second '# cache' line"),
            std::string::npos);
}

// Found by fuzz_route_trace (-rss_limit_mb): n_layer sized the per-layer table before any layer line was read, so a
// 200-byte file with n_layer=366666666 allocated 6 GB, and n_layer=2147483647 threw std::bad_alloc.
TEST(RouteTrace, LayerCountBoundedByFileSize) {
  const std::string csv = "turn,phase,step,layer,slot,expert,weight,residency,expert_bytes\n";
  EXPECT_NE(error_of("# route_trace v1\n# model=/m.gguf arch=x n_layer=2147483647 n_expert=4 n_expert_used=1\n" + csv)
                .find("bad.csv:2: n_layer=2147483647 needs as many '# layer=' lines, more than a file of"),
            std::string::npos);
  // The shortest layer lines a count can be given with still read.
  EXPECT_EQ(error_of("# route_trace v1\n# model= arch= n_layer=3 n_expert=1 n_expert_used=1\n"
                     "# layer=0 expert_bytes=0 dense_bytes=0\n# layer=1 expert_bytes=0 dense_bytes=0\n"
                     "# layer=2 expert_bytes=0 dense_bytes=0\n" + csv),
            "");
}

}  // namespace
}  // namespace moetier::test
