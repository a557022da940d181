/**
 * Runs a bench that starts servers and makes a database, and removes them whichever way it ends.
 * Interrupted (Ctrl-C, or SIGTERM from `timeout` or `pkill`), a bench skipped its `finally`: the
 * servers it spawned kept running (SIGTERM reaches the bench alone; Ctrl-C reaches only what shares
 * the terminal's process group) and its test database stayed, with every usage row the run wrote.
 * Now `cleanup` runs once, at the end or at the first signal; a signalled bench then exits as a
 * signalled process does (130, 143), without reporting the failures of requests cut short by the
 * cleanup itself; a second signal while it cleans up exits at once.
 */
export async function runBench(main: () => Promise<void>, cleanup: () => Promise<void>): Promise<void> {
  let cleaning: Promise<void> | null = null;
  const cleanOnce = () => (cleaning ??= cleanup().catch((err) => console.error('cleaning up after the bench:', err)));
  let interrupted = false;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)
    process.on(signal, () => {
      if (interrupted) process.exit(code);
      interrupted = true;
      void cleanOnce().finally(() => process.exit(code));
    });
  let failure: { err: unknown } | null = null;
  try {
    await main();
  } catch (err) {
    failure = { err };
  }
  // Interrupted: the handler exits once the cleanup is done.
  if (interrupted) return new Promise<void>(() => {});
  await cleanOnce();
  if (failure) throw failure.err;
  process.exit(0);
}
