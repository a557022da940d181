/** Polls `check` until it holds, failing with `what` after the deadline: tests wait on conditions, never on blind sleeps. */
export async function waitFor(check: () => boolean | Promise<boolean>, what = 'condition', timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}
