/**
 * Login cost and event-loop health (issue 3), in one run on a real PostgreSQL test database:
 *  1. login p50 over HTTP against the raw argon2id hash (and verify) p50 at the same parameters
 *     (target ≤ 1.3×);
 *  2. event-loop lag p99 while 4 logins run at once beside a stream of cheap requests
 *     (target ≤ 5 ms), with the idle lag of the same process as baseline;
 *  3. @node-rs/argon2 against Bun.password at the same parameters.
 *
 *   bun bench/login.ts            (RUNS=40 for more samples)
 */
import { hash, verify } from '@node-rs/argon2';
import { ARGON2_OPTIONS } from '../src/modules/accounts/accounts.passwords';
import { listenOptions } from '../src/platform/http/listen';
import { createTestApp } from '../tests/support/app';

const RUNS = Number(process.env.RUNS ?? 20);
const PASSWORD = 'benchmark password';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const ms = (x: number) => `${x.toFixed(2)} ms`;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/** Samples of several functions taken in turn, so a busy host slows all of them alike. */
async function interleaved<T extends Array<() => Promise<unknown>>>(n: number, ...fns: T): Promise<{ [K in keyof T]: number[] }> {
  for (const fn of fns) await fn(); // warm-up
  const out = fns.map(() => [] as number[]);
  for (let i = 0; i < n; i++) for (const [j, fn] of fns.entries()) out[j]!.push(await timed(fn));
  return out as { [K in keyof T]: number[] };
}

/** Lateness of a 1 ms timer, sampled until stop() — how long the loop was busy elsewhere. */
function lagMonitor() {
  const lags: number[] = [];
  let running = true;
  let expected = performance.now() + 1;
  const tick = () => {
    const now = performance.now();
    lags.push(Math.max(0, now - expected));
    expected = now + 1;
    if (running) setTimeout(tick, 1);
  };
  setTimeout(tick, 1);
  return {
    stop() {
      running = false;
      return lags;
    },
  };
}

const t = await createTestApp('postgres', { RATE_LIMITS: 'login=1000000/1s', LOG_LEVEL: 'warn' });
const server = t.app.listen(listenOptions('127.0.0.1', 0)); // as `cpd serve` listens
const base = `http://127.0.0.1:${server.server!.port}`;
try {
  const user = await t.services.accounts.createUser({ email: 'bench@example.com', password: PASSWORD });
  const login = async () => {
    const res = await fetch(`${base}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: user.email, password: PASSWORD }),
    });
    if (res.status !== 200) throw new Error(`login answered ${res.status}`);
    await res.arrayBuffer();
  };
  const cheap = async () => {
    const res = await fetch(`${base}/api/site`);
    await res.arrayBuffer();
  };

  // 1. Login against raw argon2.
  const stored = await hash(PASSWORD, ARGON2_OPTIONS);
  const [rawHash, rawVerify, logins] = await interleaved(RUNS, () => hash(PASSWORD, ARGON2_OPTIONS), () => verify(stored, PASSWORD), login);
  const loginP50 = pct(logins, 50);
  console.log(`argon2id hash p50 ${ms(pct(rawHash, 50))}, verify p50 ${ms(pct(rawVerify, 50))}`);
  console.log(`login p50 ${ms(loginP50)} (p90 ${ms(pct(logins, 90))})`);
  console.log(`login / raw hash: ${(loginP50 / pct(rawHash, 50)).toFixed(2)}× (target ≤ 1.3×); login / raw verify: ${(loginP50 / pct(rawVerify, 50)).toFixed(2)}×`);

  // 2. Event-loop lag: idle, with the cheap stream alone, then with 4 concurrent logins beside it.
  const idle = lagMonitor();
  await Bun.sleep(500);
  const idleLags = idle.stop();
  async function cheapStreamWhile(work: Promise<unknown>) {
    const latencies: number[] = [];
    let stop = false;
    const stream = (async () => {
      while (!stop) latencies.push(await timed(cheap));
    })();
    await work;
    stop = true;
    await stream;
    return latencies;
  }
  const streamOnly = lagMonitor();
  await cheapStreamWhile(Bun.sleep(1000));
  const streamLags = streamOnly.stop();
  const busy = lagMonitor();
  const loginsEach = Math.max(5, RUNS / 2);
  const cheapLatencies = await cheapStreamWhile(
    Promise.all(Array.from({ length: 4 }, async () => {
      for (let i = 0; i < loginsEach; i++) await login();
    })),
  );
  const busyLags = busy.stop();
  console.log(`event-loop lag p99: idle ${ms(pct(idleLags, 99))}, cheap stream alone ${ms(pct(streamLags, 99))}, with 4 concurrent logins ${ms(pct(busyLags, 99))} (target ≤ 5 ms; max ${ms(Math.max(...busyLags))})`);
  console.log(`  ${4 * loginsEach} logins, ${cheapLatencies.length} cheap requests meanwhile (p50 ${ms(pct(cheapLatencies, 50))}, p99 ${ms(pct(cheapLatencies, 99))})`);

  // 3. @node-rs/argon2 against Bun.password at the same parameters (Bun's parallelism is 1).
  const bunOpts = { algorithm: 'argon2id', memoryCost: ARGON2_OPTIONS.memoryCost, timeCost: ARGON2_OPTIONS.timeCost } as const;
  const bunStored = await Bun.password.hash(PASSWORD, bunOpts);
  const [nodeHash, bunHash, nodeVerify, bunVerify] = await interleaved(
    RUNS,
    () => hash(PASSWORD, ARGON2_OPTIONS),
    () => Bun.password.hash(PASSWORD, bunOpts),
    () => verify(stored, PASSWORD),
    () => Bun.password.verify(PASSWORD, bunStored),
  );
  console.log(`@node-rs/argon2 hash p50 ${ms(pct(nodeHash, 50))}, verify p50 ${ms(pct(nodeVerify, 50))}`);
  console.log(`Bun.password    hash p50 ${ms(pct(bunHash, 50))}, verify p50 ${ms(pct(bunVerify, 50))}`);
  console.log(`@node-rs/argon2 / Bun.password: hash ${(pct(nodeHash, 50) / pct(bunHash, 50)).toFixed(2)}×, verify ${(pct(nodeVerify, 50) / pct(bunVerify, 50)).toFixed(2)}×`);
  // Same PHC format both ways: either library verifies the other's hash.
  console.log(`cross-verify: node-rs→Bun ${await Bun.password.verify(PASSWORD, stored)}, Bun→node-rs ${await verify(bunStored, PASSWORD)}`);
} finally {
  await server.stop(true);
  await t.close();
}
