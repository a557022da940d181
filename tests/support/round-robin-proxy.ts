/**
 * A loopback round-robin HTTP load balancer for replica tests, standing in for nginx or HAProxy:
 *
 *   const lb = startRoundRobinProxy([a.url, b.url, c.url]);
 *   fetch(`${lb.url}/healthz`)            // served by the next replica in turn
 *   res.headers.get(BACKEND_HEADER)       // which replica answered
 *   lb.close();
 *
 * Streams pass through as they arrive (nothing is buffered), so SSE works as behind a proxy with
 * buffering off. Like nginx's default `proxy_next_upstream error`, a replica that refuses the
 * connection is skipped for the next one: nothing was sent, so even a POST is safe to try again.
 * A replica that dies after the request was sent is not retried: its client sees the failure.
 * The client's address is appended to X-Forwarded-For, as a proxy for TRUST_PROXY=true does.
 * Hand-written: a few lines of Bun.serve + fetch; a proxy library would add nothing here.
 */
export const BACKEND_HEADER = 'x-test-backend';

export interface RoundRobinProxy {
  url: string;
  /** Requests sent to each backend URL so far. */
  served: Map<string, number>;
  close(): void;
}

export function startRoundRobinProxy(backends: string[]): RoundRobinProxy {
  let next = 0;
  const served = new Map(backends.map((b) => [b, 0]));
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    idleTimeout: 0,
    async fetch(request, srv) {
      const url = new URL(request.url);
      const body = request.method === 'GET' || request.method === 'HEAD' ? undefined : await request.arrayBuffer();
      const headers = new Headers(request.headers);
      const forwarded = headers.get('x-forwarded-for');
      const client = srv.requestIP(request)?.address ?? '127.0.0.1';
      headers.set('x-forwarded-for', forwarded ? `${forwarded}, ${client}` : client);
      headers.delete('host');
      for (let tried = 0; tried < backends.length; tried++) {
        const backend = backends[next++ % backends.length]!;
        let res: Response;
        try {
          res = await fetch(`${backend}${url.pathname}${url.search}`, { method: request.method, headers, body, redirect: 'manual', decompress: false });
        } catch (err) {
          if ((err as { code?: string }).code === 'ECONNREFUSED') continue;
          throw err;
        }
        served.set(backend, (served.get(backend) ?? 0) + 1);
        const out = new Headers(res.headers);
        out.set(BACKEND_HEADER, backend);
        return new Response(res.body, { status: res.status, headers: out });
      }
      return Response.json({ error: 'no replica accepted the connection' }, { status: 502 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, served, close: () => server.stop(true) };
}
