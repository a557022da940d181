/**
 * The client's address for rate limits and the session list. Behind a reverse proxy every
 * connection comes from the proxy, so with TRUST_PROXY=true we take the address the proxy
 * appended: the LAST entry of X-Forwarded-For (entries to its left are whatever the client sent
 * and can be forged). Without TRUST_PROXY the header is ignored and the socket address is used.
 * Null when there is no socket (app.handle in tests).
 */
import type { Server } from 'bun';

export function clientAddress(request: Request, server: Pick<Server<unknown>, 'requestIP'> | null | undefined, trustProxy: boolean): string | null {
  if (trustProxy) {
    const forwarded = request.headers.get('x-forwarded-for');
    const last = forwarded?.split(',').at(-1)?.trim();
    if (last) return last;
  }
  return server?.requestIP(request)?.address ?? null;
}
