/**
 * Headers set on Elysia's context (`set.headers`: X-Request-Id, a module's defaults such as the
 * gateway's X-Cost) moved onto a Response a hook or handler made, the ones it set itself winning,
 * as Elysia would merge them. Moved, not copied: with the context left without them Elysia does
 * not copy the Response into a new one to merge them in (1.6 µs of the 25 µs an authenticated 302
 * took in-process; a gateway answer's body went through a stream). Set-Cookie stays on the
 * context: Elysia appends it.
 */
export function moveContextHeaders(response: Response, headers: Record<string, unknown>): void {
  for (const name in headers) {
    const value = headers[name];
    if (name === 'set-cookie' || typeof value !== 'string') continue;
    if (!response.headers.has(name)) response.headers.set(name, value);
    delete headers[name];
  }
}
