// The official `openai` npm client against a running `moetier serve`: chat and completions, streamed and not,
// usage, and an error surfacing as the SDK's APIError. Run by serve_client_test.cpp with NODE_PATH pointing at
// a pinned install; prints one JSON line with what it saw, which the C++ test checks (and compares with `run`).
//   node openai_client.cjs BASE_URL MESSAGE MAX_TOKENS
const OpenAI = require('openai');

async function main() {
  const [baseURL, message, maxTokens] = process.argv.slice(2);
  const client = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'sekrit', timeout: 60000, maxRetries: 0 });
  const out = {};
  const messages = [{ role: 'user', content: message }];
  const n = Number(maxTokens);

  // cache_prompt false (llama-server's field, passed through by the SDK): each request prefills its whole prompt as
  // `run` does, so greedy texts compare exactly (a reused prefix rounds differently).
  const cold = { cache_prompt: false };
  const r = await client.chat.completions.create({ model: 'm', messages, temperature: 0, max_tokens: n, ...cold });
  out.chat = { content: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage,
               object: r.object };

  const stream = await client.chat.completions.create({
    model: 'm', messages, temperature: 0, max_tokens: n, stream: true, stream_options: { include_usage: true },
    ...cold });
  let content = '', chunks = 0, finish = null, usage = null, role = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    const c = chunk.choices[0];
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) content += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  out.chat_stream = { content, chunks, finish, usage, role };

  const t = await client.completions.create({ model: 'm', prompt: message, temperature: 0, max_tokens: n, ...cold });
  out.completion = { text: t.choices[0].text, finish: t.choices[0].finish_reason, usage: t.usage };
  const ts = await client.completions.create({ model: 'm', prompt: message, temperature: 0, max_tokens: n,
                                               stream: true, ...cold });
  let text = '';
  for await (const chunk of ts) text += chunk.choices.length ? chunk.choices[0].text : '';
  out.completion_stream = { text };

  const models = await client.models.list();
  out.models = models.data.map((m) => m.id);

  try {
    await client.chat.completions.create({ model: 'm', messages, temperature: 5 });
    out.bad = { status: 'no error' };
  } catch (e) {
    out.bad = { status: e.status, message: e.message, isApiError: e instanceof OpenAI.APIError };
  }
  const wrongKey = new OpenAI({ baseURL: baseURL + '/v1', apiKey: 'wrong', maxRetries: 0 });
  try {
    await wrongKey.models.list();
    out.wrong_key = { status: 'no error' };
  } catch (e) {
    out.wrong_key = { status: e.status };
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error('openai client failed:', e);
  process.exit(1);
});
