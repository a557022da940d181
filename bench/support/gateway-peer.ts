/**
 * Helper processes for bench/gateway.ts, each printing its base URL on one stdout line:
 *   bun bench/support/gateway-peer.ts upstream [ms]      the fake OpenAI upstream (streams: 20 chunks 10 ms apart,
 *                                                        then the usage chunk, when asked for, and [DONE] at once;
 *                                                        after [ms] to the first byte when the prompt is over 10 KB)
 *   bun bench/support/gateway-peer.ts bare <upstream>    a bare Bun.serve passthrough proxy (the baseline)
 */
import { startFakeUpstream } from '../../tests/support/fake-upstream';

const [mode, target] = process.argv.slice(2);

if (mode === 'upstream') {
  const content = 'token '.repeat(20).trim();
  // A prompt over 10 KB makes the model take `target` ms (a number here) before its first byte, as a prefill would.
  const prefillMs = Number(target ?? 0);
  const long = (body: Record<string, any>) => JSON.stringify(body.messages ?? []).length > 10_000;
  const up = await startFakeUpstream({
    models: ['bench'],
    // The usage chunk (cpd asks for it, the other contenders do not) comes with [DONE], as from a
    // real server: 10 ms later, it made cpd's streams 10 ms longer than the others' and their last
    // gap 20 ms.
    behaviour: (body) => (body.stream ? { content, chunkDelayMs: 10, trailerAtOnce: true, firstByteDelayMs: long(body) ? prefillMs : 0 } : {}),
  });
  console.log(up.url);
} else if (mode === 'bare') {
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    // As a production server (and `cpd serve`) runs: Bun's development mode costs ~1 µs per request.
    development: false,
    async fetch(req) {
      const url = new URL(req.url);
      const res = await fetch(`${target}${url.pathname.replace(/^\/v1/, '')}`, { method: req.method, headers: { 'content-type': 'application/json' }, body: req.body, signal: req.signal });
      return new Response(res.body, { status: res.status, headers: { 'content-type': res.headers.get('content-type') ?? 'application/json' } });
    },
  });
  console.log(`http://127.0.0.1:${server.port}/v1`);
} else {
  console.error('usage: gateway-peer.ts upstream | bare <upstream-url>');
  process.exit(2);
}
