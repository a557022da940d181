/**
 * The one polling helper: calls `read` until its value satisfies `until` (default: truthy) and
 * returns that value; past the deadline it fails naming `what` and the last value seen. Tests wait
 * on conditions this way, never on blind sleeps.
 */
export async function waitFor<T>(
  read: () => T | Promise<T>,
  what = 'condition',
  opts: { until?: (value: T) => boolean; timeoutMs?: number } = {},
): Promise<T> {
  const { until = Boolean, timeoutMs = 30_000 } = opts;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (until(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value: ${describe(value)}`);
    await Bun.sleep(10);
  }
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v)) ?? String(value);
  } catch {
    return String(value);
  }
}
