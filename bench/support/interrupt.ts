/**
 * A bench interrupted (Ctrl-C, or SIGTERM from `timeout` or `pkill`) skips its `finally`: the
 * servers it spawned kept running (SIGTERM reaches the bench alone; Ctrl-C reaches only what shares
 * the terminal's process group) and its test database stayed, with every usage row the run wrote.
 * `cleanup` runs on either signal, once, and the bench then exits as a signalled process does.
 */
export function onInterrupt(cleanup: () => Promise<void>): void {
  let cleaning = false;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)
    process.on(signal, () => {
      if (cleaning) return;
      cleaning = true;
      void cleanup()
        .catch((err) => console.error(`cleaning up after ${signal}:`, err))
        .finally(() => process.exit(code));
    });
}
