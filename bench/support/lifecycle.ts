/**
 * A bench's processes and what it made, removed whichever way it ends. Interrupted (Ctrl-C, or
 * SIGTERM from `timeout` or `pkill`), a bench skipped its `finally`: the servers it spawned kept
 * running (SIGTERM reaches the bench alone; Ctrl-C reaches only what shares the terminal's process
 * group) and its test database stayed, with every usage row the run wrote.
 */
import type { Subprocess } from 'bun';

const spawned: Subprocess[] = [];

/** A process the bench spawned (`track(Bun.spawn(…))`), stopped by runBench when the bench ends. */
export function track<P extends Subprocess>(proc: P): P {
  spawned.push(proc);
  return proc;
}

/** Spawns a helper that prints its address as its first stdout line; answers that line and the pid. */
export async function spawnLine(
  cmd: string[],
  opts: { cwd: string; env?: Record<string, string | undefined> },
): Promise<{ line: string; pid: number }> {
  const proc = track(Bun.spawn(cmd, { ...opts, stdout: 'pipe', stderr: 'inherit' }));
  const reader = proc.stdout.getReader();
  const { value } = await reader.read();
  reader.releaseLock();
  return { line: new TextDecoder().decode(value).trim().split('\n')[0]!, pid: proc.pid };
}

/**
 * Runs `main`, then stops every tracked process and runs `cleanup` (the bench's database, its
 * directories): once, at the end or at the first signal. A signalled bench then exits as a
 * signalled process does (130, 143), without reporting the failures of requests cut short by the
 * cleanup itself; a second signal while it cleans up exits at once.
 */
export async function runBench(main: () => Promise<void>, cleanup: () => Promise<void>): Promise<void> {
  let cleaning: Promise<void> | null = null;
  const cleanOnce = () =>
    (cleaning ??= (async () => {
      for (const proc of spawned) proc.kill();
      await Promise.all(spawned.map((proc) => proc.exited));
      await cleanup();
    })().catch((err) => console.error('cleaning up after the bench:', err)));
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
