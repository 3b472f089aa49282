// A minimal hand-written SSE reader, the benchmarks' reference for the engine (see
// READER in lib.rs): fetch, read chunks, stamp each as it is read, find the first content
// event. Each request gives its bias: the TTFT it read minus the demo server's own time
// to write its first token (from the demo's final event).

const body = JSON.stringify({model: 'reference', stream: true, messages: [{role: 'user', content: 'hi'}]});

// The fetch() options the reader asks with, unless a caller passes its own maker.
const plain = () => ({method: 'POST', headers: {'content-type': 'application/json'}, body});

// One request's bias. `options()` makes the fetch() options, before the clock starts.
async function one(url, options = plain) {
  const init = options();
  const t0 = performance.now();
  const response = await fetch(url, init);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', ttft = null, server = null;
  for (;;) {
    const {done: end, value} = await reader.read();
    const t = performance.now() - t0;
    if (end) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const data = JSON.parse(event.slice(6));
      const content = data.choices && data.choices[0] && data.choices[0].delta && data.choices[0].delta.content;
      if (ttft === null && content) ttft = t;
      if (data.server_timings) server = data.server_timings.first_token_written_ms;
    }
  }
  return ttft - server;
}

// The engine's pause after each batch, for a reader in a worker: the worker tells the
// page ('frame'), the page draws and answers ('drawn', see PAGE_SIDE in lib.rs), and the
// worker notices the answer in 2 ms polls, giving up after 250 ms, as the engine's
// Drawn::wait does. With `told`, the answer wakes the worker instead of a poll.
let drawn = true;
let wake = () => {};
async function pause(told = false) {
  drawn = false;
  const answered = new Promise((resolve) => { wake = resolve; });
  postMessage('frame');
  if (told) return answered;
  const until = performance.now() + 250;
  while (!drawn && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 2));
}
// The page's answer, for a worker's onmessage: true if the message was the answer.
function answered(message) {
  if (message !== 'drawn') return false;
  drawn = true;
  wake();
  return true;
}

// `n` requests, `k` at once, batch after batch as the engine's concurrency phase sends
// them, after `w` warm-up requests one at a time (the connection, over TLS its handshake,
// and the CORS preflight's cache entry, before anything is counted). `after`, if given,
// is awaited after each batch (the engine's pause). Resolves to the biases.
async function run(url, n, k, w, after = null, options = plain) {
  for (let i = 0; i < w; i++) await one(url, options);
  const out = [];
  for (let sent = 0; sent < n; sent += k) {
    out.push(...await Promise.all(Array.from({length: k}, () => one(url, options))));
    if (after) await after();
  }
  return out;
}
