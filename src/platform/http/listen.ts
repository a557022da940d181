/**
 * How `cpd serve` listens (Bun.serve options through Elysia's listen). Two of Elysia's defaults are
 * turned off, because each is unsafe for a server on a host of its own:
 * - `development`: Elysia sets it unless NODE_ENV=production, and Bun's development mode answers an
 *   error that reaches it with a page of the message, stack and source lines. cpd's error plugin
 *   answers every error it sees; an error that escaped it must not show the code to a client.
 * - `reusePort`: with it a second `cpd serve` on the same port (another site's unit given the same
 *   PORT by mistake) started too, and the kernel split the connections between the two sites, their
 *   databases and currencies. Now the second one cannot listen and stops.
 */
import type { Server } from 'bun';

/**
 * Seconds a connection may stay silent before Bun closes it: between keep-alive requests, and also
 * while a request waits for its answer with nothing sent yet (a gateway request gets its own,
 * holdOpen).
 */
export const IDLE_TIMEOUT_SECONDS = 120;

/**
 * The longest silence Bun allows one request (`server.timeout`): asked for 300 s, it closed the
 * connection at 256 s.
 */
export const MAX_REQUEST_SILENCE_SECONDS = 255;

/**
 * Lets `request` stay silent for `seconds` (at most MAX_REQUEST_SILENCE_SECONDS) instead of the
 * server's IDLE_TIMEOUT_SECONDS: while it waits for a slow upstream's answer, or between the chunks
 * of a stream. Bun counts a request still waiting for its answer as silent, and closes it with a
 * connection reset.
 */
export function holdOpen(server: Pick<Server<unknown>, 'timeout'> | null, request: Request, seconds: number): void {
  server?.timeout(request, Math.min(seconds, MAX_REQUEST_SILENCE_SECONDS));
}

export function listenOptions(hostname: string, port: number) {
  return {
    hostname,
    port,
    development: false,
    reusePort: false,
    // The API's limits (a JSON 413, chunked bodies included) are the error plugin's; Bun's is a backstop.
    maxRequestBodySize: 1024 * 1024 * 1024,
    idleTimeout: IDLE_TIMEOUT_SECONDS,
  };
}
