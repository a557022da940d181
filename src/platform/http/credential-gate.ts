/**
 * Credentials are checked before a request's body is read. Elysia reads and parses a body before
 * any route hook runs, so a stranger's 60 MB JSON body to a route that needs a credential was
 * read, held and parsed before the 401 (six of them in parallel: RSS 107 → 559 MB), and a client
 * that declared 50 MB and sent 1 KB was never answered. The gate runs in onRequest instead, before
 * anything reads the body: it finds the route itself (its method and path template, in a table of
 * the routes that declare credentials, built once the app is mounted), runs the route's check and
 * keeps what it found (the caller) for the route's macro, which does not check again.
 *
 * A refused request's body is never read by cpd's code: once the answer is sent, Bun drops what
 * the client still sends without handing it over or keeping it, and keeps the connection, so the
 * answer reaches a client still sending instead of a connection reset (closing on unread bytes
 * makes the kernel reset the connection, and a client busy sending never read its 401: tried).
 *
 * A route declares its credentials in its OpenAPI detail (`CREDENTIALS_DETAIL`: the auth modes, or
 * `agent` for the agent API), which also tells readers of the OpenAPI document. A request the
 * table does not place (a path spelled in a way only Bun's router resolves) is checked by the
 * route's macro instead (`admit`), after its body: never without a check.
 */
import type { Server } from 'bun';
import { Elysia } from 'elysia';
import { Memoirist } from 'memoirist';

export const CREDENTIALS_DETAIL = 'x-cpd-auth';

/** Checks a request against the modes its route declares: what the route's handler gets (the caller), or throws 401/403. */
export type CredentialCheck = (request: Request, server: Server<unknown> | null, modes: readonly string[]) => Promise<unknown>;

/** What each request's check found, by request (the one later hooks get: the gate runs after the body limit's swap). */
const passes = new WeakMap<Request, unknown>();

/** Runs `check` unless the gate already did for this request; its result is then passOf(request). */
export async function admit(request: Request, check: () => Promise<unknown>): Promise<void> {
  if (!passes.has(request)) passes.set(request, await check());
}

export const passOf = <T>(request: Request): T => passes.get(request) as T;

/** The request's path, without its query (what the routes are matched on). */
export function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  const query = url.indexOf('?', start);
  return query === -1 ? url.slice(start) : url.slice(start, query);
}

export function credentialGate(check: CredentialCheck) {
  const routes = new Memoirist<readonly string[]>();
  return {
    plugin: new Elysia({ name: 'cpd/credential-gate' }).onRequest(async ({ request, server }) => {
      const modes = routes.find(request.method, pathOf(request.url))?.store;
      if (modes) passes.set(request, await check(request, server, modes));
    }),
    /** Learns which routes declare credentials; call once every route is mounted. */
    protect(mounted: ReadonlyArray<{ method: string; path: string; hooks?: { detail?: unknown } }>) {
      for (const r of mounted) {
        const modes = (r.hooks?.detail as Record<string, unknown> | undefined)?.[CREDENTIALS_DETAIL];
        if (!Array.isArray(modes)) continue;
        // Elysia also serves each path with a trailing slash added or removed.
        const loose = r.path.endsWith('/') ? r.path.slice(0, -1) : `${r.path}/`;
        for (const path of [r.path, loose]) if (path) routes.add(r.method, path, modes as string[]);
      }
    },
  };
}
