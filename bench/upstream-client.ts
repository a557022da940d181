/**
 * The gateway's two upstream clients alone: Bun's fetch (the default) and cpd's own HTTP/1.1
 * client (ROUTER_UPSTREAM_CLIENT=http1), each POSTing a chat completion to the fake OpenAI
 * upstream in its own process, at concurrency 1 and 64, rounds of the two alternated. Reports p50
 * and p99 latency, its ratio to the other client's, and this process's CPU time per request
 * (docs/decisions/0021-upstream-http-client.md).
 *
 *   bun bench/upstream-client.ts        (N=20000 ROUNDS=3 to change the counts)
 */
import { fetchPost, http1Post } from '../src/platform/http/http1-client';
import { runBench, spawnLine } from './support/lifecycle';

const N = Number(process.env.N ?? 20000);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const { line: upstream } = await spawnLine([process.execPath, 'bench/support/gateway-peer.ts', 'upstream'], {
  cwd: `${import.meta.dir}/..`,
});
const url = `${upstream}/chat/completions`;
const body = JSON.stringify({ model: 'bench', messages: [{ role: 'user', content: 'hi' }] });
const clients = { fetch: fetchPost, http1: http1Post };

async function run(post: typeof fetchPost, concurrency: number, n: number) {
  const times: number[] = [];
  const cpu = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < n) {
        const start = performance.now();
        const res = await post(url, { headers: { 'content-type': 'application/json' }, body, signal: new AbortController().signal });
        await res.text();
        times.push(performance.now() - start);
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return { times, cpuUs: (used.user + used.system) / n };
}

await runBench(
  async () => {
    for (const concurrency of [1, 64]) {
      const n = concurrency === 1 ? N / 4 : N;
      const all = { fetch: [] as number[], http1: [] as number[] };
      const cpu = { fetch: 0, http1: 0 };
      for (const post of Object.values(clients)) await run(post, concurrency, n / 4); // warm-up
      for (let r = 0; r < ROUNDS; r++)
        for (const [name, post] of Object.entries(clients) as Array<[keyof typeof clients, typeof fetchPost]>) {
          const { times, cpuUs } = await run(post, concurrency, n);
          all[name].push(...times);
          cpu[name] += cpuUs / ROUNDS;
        }
      const pct = (t: number[], p: number) => t.sort((a, b) => a - b)[Math.floor(t.length * p)]!;
      console.log(`concurrency ${concurrency}, ${n} requests × ${ROUNDS} rounds each`);
      for (const name of ['fetch', 'http1'] as const)
        console.log(
          `  ${name.padEnd(6)} p50 ${pct(all[name], 0.5).toFixed(3)} ms  p99 ${pct(all[name], 0.99).toFixed(3)} ms  client cpu ${cpu[name].toFixed(1)} µs/req`,
        );
      console.log(
        `  fetch ÷ http1: p50 ${(pct(all.fetch, 0.5) / pct(all.http1, 0.5)).toFixed(2)}×, cpu ${(cpu.fetch / cpu.http1).toFixed(2)}×`,
      );
    }
  },
  async () => {},
);
