/**
 * A delivery connects to the address that was checked: the URL's host is replaced by that address
 * and the name kept for the Host header and TLS (SNI and the certificate's name), so a second DNS
 * answer (rebinding) is never used. Checked against a local HTTPS server whose certificate names
 * hooks.test (a self-signed fixture, trusted here by `ca`).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { pinTo } from '../../../src/modules/webhooks/webhooks.addresses';

const FIXTURES = join(import.meta.dir, '../../fixtures');

describe('pinned delivery targets', () => {
  let server: ReturnType<typeof Bun.serve>;
  let ca: string;
  beforeAll(async () => {
    ca = await Bun.file(join(FIXTURES, 'hooks.test-cert.pem')).text();
    const key = await Bun.file(join(FIXTURES, 'hooks.test-key.pem')).text();
    server = Bun.serve({ port: 0, hostname: '127.0.0.1', tls: { cert: ca, key }, fetch: (req) => new Response(req.headers.get('host')) });
  });
  afterAll(() => server.stop(true));

  test('the request reaches the pinned address, with the name in Host and TLS', async () => {
    const target = pinTo(new URL(`https://hooks.test:${server.port}/cpd?x=1`), '127.0.0.1');
    expect(target).toEqual({
      url: new URL(`https://127.0.0.1:${server.port}/cpd?x=1`),
      host: `hooks.test:${server.port}`,
      serverName: 'hooks.test',
    });
    const res = await fetch(target.url, { method: 'POST', headers: { host: target.host! }, tls: { ca, serverName: target.serverName! } });
    expect(await res.text()).toBe(`hooks.test:${server.port}`);
    // Without the name, the certificate does not match the address: the name is what is verified.
    await expect(fetch(target.url, { tls: { ca } })).rejects.toThrow(/ALTNAME|certificate/i);
  });

  test('IPv6 addresses are bracketed; an address literal in the URL is left as it is', () => {
    expect(pinTo(new URL('https://hooks.test/x'), '2606:4700::1111').url.href).toBe('https://[2606:4700::1111]/x');
    expect(pinTo(new URL('https://93.184.215.14/x'), '93.184.215.14')).toEqual({ url: new URL('https://93.184.215.14/x') });
  });
});
