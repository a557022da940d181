import { buildApp } from '../app';
import { loadConfig } from '../config';
import { createContext } from '../platform/context-factory';
import { migrate } from '../platform/db';
import { parseCommand } from './args';

const HELP = `
Usage: cpd serve

Starts the HTTP server (API, gateway, router, agents, pages) for one site. Applies pending
migrations first. Configuration comes from the environment; see README.md.
Stops gracefully on SIGTERM or SIGINT: in-flight requests finish (up to SHUTDOWN_TIMEOUT, 10s).
`;

const SHUTDOWN_DEADLINE_MS = 10_000;

export async function serveCommand(argv: string[]) {
  parseCommand(argv, {}, HELP);
  const config = loadConfig();
  const ctx = await createContext(config);
  const applied = await migrate(ctx.database);
  if (applied.length) ctx.log.info({ msg: 'migrations applied', migrations: applied });
  const { app } = await buildApp(ctx);
  app.listen({ hostname: config.host, port: config.port, maxRequestBodySize: 64 * 1024 * 1024, idleTimeout: 120 });
  const server = app.server!;
  ctx.log.info({ msg: 'listening', url: `http://${server.hostname}:${server.port}`, site: config.site, database: ctx.database.kind });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    ctx.log.info({ msg: 'shutting down', signal });
    const deadline = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), SHUTDOWN_DEADLINE_MS).unref());
    // stop(false): stop accepting, let in-flight requests finish.
    if ((await Promise.race([server.stop(false).then(() => 'done' as const), deadline])) === 'timeout') {
      ctx.log.warn({ msg: 'shutdown deadline reached; closing open connections' });
      await server.stop(true);
    }
    await ctx.shutdown();
    ctx.log.info({ msg: 'stopped' });
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
