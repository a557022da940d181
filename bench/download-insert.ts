/**
 * PostgreSQL's CPU per stored download record, for the batch insert the registry writes first
 * (plain) against its replay form (ON CONFLICT DO NOTHING), the two alternated in one run so
 * machine load hits both alike. CPU is read from /proc for every `postgres` process (the server's
 * own work, which the 302's req/s shares two cores with); rows are batched as under load (500).
 *
 *   bun bench/download-insert.ts        (BATCHES=80 of 500 rows per form and round, ROUNDS=5)
 */
import { insertDownloadsSql, type PendingDownload } from '../src/modules/registry/registry.service';
import { newId } from '../src/platform/ids';
import { createTestContext } from '../tests/support/app';
import { postgresCpuMs } from './support/process-cpu';

const BATCHES = Number(process.env.BATCHES ?? 80);
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const BATCH = 500;
const tc = await createTestContext('postgres', { LOG_LEVEL: 'warn' });
const database = tc.ctx.database;
const batch = (): PendingDownload[] =>
  Array.from({ length: BATCH }, () => [newId('dl'), newId('usr'), newId('key'), newId('art'), 'bench-model', 'int4', 'v1.0', Date.now()]);

async function measure(replay: boolean): Promise<number> {
  const cpu0 = postgresCpuMs();
  for (let i = 0; i < BATCHES; i++) await database.prepared(insertDownloadsSql(replay), [JSON.stringify(batch())]);
  return ((postgresCpuMs() - cpu0) * 1000) / (BATCHES * BATCH);
}

try {
  await measure(false); // warm-up: the table's first pages, the backends' caches
  const ratios: number[] = [];
  console.log(`PostgreSQL CPU per download record, ${BATCHES} batches of ${BATCH} rows per form and round`);
  for (let round = 1; round <= ROUNDS; round++) {
    const plain = await measure(false);
    const replay = await measure(true);
    ratios.push(plain / replay);
    console.log(`round ${round}: plain ${plain.toFixed(2)} µs  on conflict ${replay.toFixed(2)} µs  plain ÷ on conflict ${(plain / replay).toFixed(2)}`);
  }
  ratios.sort((a, b) => a - b);
  console.log(`median plain ÷ on conflict: ${ratios[Math.floor(ratios.length / 2)]!.toFixed(2)}`);
} finally {
  await tc.close();
}
