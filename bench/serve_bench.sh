#!/usr/bin/env bash
# The server's cost and what its KV prefix reuse saves (see bench/README.md), on a synthetic Qwen3-30B-A3B Q4_K_M
# (~17 GB, written on first use) with its experts streamed through a RAM expert cache:
#   1. decode tok/s of one greedy completion through `moetier serve` (the request's own rate, as the server logs
#      it, and the engine's decode steps) against `moetier run` on the same prompt with the same flags: each run a
#      fresh process, so each starts with an empty expert cache;
#   2. time to first token of a chat's second turn on a warm server, with the first turn's prefix kept in the
#      slot's KV cache (cache_prompt true, the default) against the same turn prefilled whole (cache_prompt false,
#      llama-server's field), alternated, each after a first turn of its own conversation.
#
#   bench/serve_bench.sh [MODEL.gguf]
#   env: BIN (build/release), RUNS (3), TOKENS (64) decode tokens, THREADS (2), CACHE_MB (4000), HISTORY_WORDS (300)
#        words in the first user message (the reused prefix), OUT (build/bench/serve) logs
#
# Prints the medians, with every run's figure, as markdown.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-build/release}/moetier
[ -x "$bin" ] || { echo "serve_bench: no $bin: build first (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }
for tool in jq curl; do command -v $tool > /dev/null || { echo "serve_bench: needs $tool" >&2; exit 1; }; done
runs=${RUNS:-3}; tokens=${TOKENS:-64}; threads=${THREADS:-2}; cache=${CACHE_MB:-4000}; words=${HISTORY_WORDS:-300}
out=${OUT:-build/bench/serve}; mkdir -p "$out"
model=${1:-build/bench/qwen3-30b-a3b-Q4_K_M.gguf}
if [ ! -f "$model" ]; then
  [ $# -eq 0 ] || { echo "serve_bench: no model $model" >&2; exit 1; }
  mkdir -p "$(dirname "$model")"
  "$bin" synth --preset qwen3-30b-a3b --type Q4_K_M -o "$model"
fi
flags=(-m "$model" --experts stream --cache-mb "$cache" -t "$threads" -c 2048)
# Every run starts cold: no heat profile kept, so none warm-starts the next (engine/heat_keeper.h).
export MOETIER_HEAT=off
prompt="Once upon a time"

median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
                                            else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

server_pid=""
stop_server() { if [ -n "$server_pid" ]; then kill -INT "$server_pid" 2> /dev/null || true; wait "$server_pid" 2> /dev/null || true; server_pid=""; fi; }
trap stop_server EXIT
# Starts `moetier serve` with the run flags on a free port; sets $url once it is ready.
start_server() {
  local log=$1
  "$bin" serve "${flags[@]}" --port 0 > "$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do
    if grep -q '^ready:' "$log"; then
      url=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | head -1 | sed 's/listening on //')
      return 0
    fi
    kill -0 "$server_pid" 2> /dev/null || { echo "serve_bench: the server exited:" >&2; cat "$log" >&2; exit 1; }
    sleep 0.2
  done
  echo "serve_bench: the server was not ready after 120 s" >&2; exit 1
}
post() { curl -sS --fail-with-body -H 'Content-Type: application/json' -d "$2" "$url$1"; }

echo "# serve_bench: $(basename "$model"), experts streamed, --cache-mb $cache, -t $threads, $tokens tokens, $runs runs"
run_rates=(); req_rates=(); eng_rates=()
for r in $(seq 1 "$runs"); do
  csv=$out/run$r.csv
  "$bin" run "${flags[@]}" --temp 0 -n "$tokens" -p "$prompt" --csv "$csv" > "$out/run$r.log" 2>&1
  run_rates+=("$(grep '^# summary' "$csv" | tr ' ' '\n' |
    awk -F= '$1 == "decode_tokens" {n = $2} $1 == "decode_ms" {ms = $2} END {print n * 1000 / ms}')")
  start_server "$out/serve$r.log"
  post /v1/completions "{\"prompt\": \"$prompt\", \"temperature\": 0, \"max_tokens\": $tokens}" > "$out/reply$r.json"
  stats=$(curl -sS "$url/v1/moetier/stats")
  req_rates+=("$(jq '.requests[-1].decode_tps' <<< "$stats")")
  eng_rates+=("$(jq '.total.decode_tokens * 1000 / .total.decode_ms' <<< "$stats")")
  stop_server
done
printf '\n| decode tok/s | median | runs |\n| --- | --- | --- |\n'
printf '| `moetier run` | %.2f | %s |\n' "$(printf '%s\n' "${run_rates[@]}" | median)" "${run_rates[*]}"
printf '| `serve`, the request (first token to last, sampling and text included) | %.2f | %s |\n' \
  "$(printf '%s\n' "${req_rates[@]}" | median)" "${req_rates[*]}"
printf '| `serve`, the engine'"'"'s decode steps | %.2f | %s |\n' "$(printf '%s\n' "${eng_rates[@]}" | median)" "${eng_rates[*]}"

# 2. TTFT of a second turn, prefix reused or not, on one warm server.
start_server "$out/serve-ttft.log"
history=$(awk -v n="$words" 'BEGIN {split("the a little dog ran over hill and far away to see what lay beyond", w, " ");
  s = 12345; for (i = 0; i < n; ++i) { s = (s * 1103515245 + 12345) % 2147483648; printf "%s%s", (i ? " " : ""), w[1 + int(s / 2147483648 * 15)] } }')
turn() {  # conversation id, cache_prompt: prints the second turn's TTFT in ms and its reused tokens
  local id=$1 cache_prompt=$2 first second reply
  first=$(jq -n --arg u "Story $id: $history" '{messages: [{role: "user", content: $u}], temperature: 0, max_tokens: 16}')
  reply=$(post /v1/chat/completions "$first" | jq -r '.choices[0].message.content')
  second=$(jq -n --arg u "Story $id: $history" --arg a "$reply" --argjson c "$cache_prompt" \
    '{messages: [{role: "user", content: $u}, {role: "assistant", content: $a}, {role: "user", content: "And then?"}],
      temperature: 0, max_tokens: 1, cache_prompt: $c}')
  post /v1/chat/completions "$second" > /dev/null
  curl -sS "$url/v1/moetier/stats" | jq -r '.requests[-1] | "\(.ttft_ms) \(.reused_tokens) \(.prompt_tokens)"'
}
turn 0 true > /dev/null  # warms the expert cache and the dense weights
reused=(); cold=(); reused_tok=""; prompt_tok=""
for r in $(seq 1 "$runs"); do
  read -r ms n p < <(turn "r$r" true); reused+=("$ms"); reused_tok=$n; prompt_tok=$p
  read -r ms _ _ < <(turn "c$r" false); cold+=("$ms")
done
stop_server
printf '\n| second turn (%s prompt tokens) | TTFT ms, median | runs |\n| --- | --- | --- |\n' "$prompt_tok"
printf '| prefix reused (%s tokens from the KV cache) | %.1f | %s |\n' "$reused_tok" \
  "$(printf '%s\n' "${reused[@]}" | median)" "${reused[*]}"
printf '| whole prompt prefilled (cache_prompt false) | %.1f | %s |\n' "$(printf '%s\n' "${cold[@]}" | median)" "${cold[*]}"
