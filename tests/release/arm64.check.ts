/**
 * `make release-check`: the linux-arm64 release artifact, run under Debian's qemu-user-static with
 * Debian's arm64 glibc (libc6-arm64-cross, libgcc-s1-arm64-cross) as its library root. Not part of
 * `bun test`'s default run: it needs `make release` first, and the first start under emulation
 * (the embedded database's initdb) takes about a minute.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join, resolve } from 'node:path';
import { type RunningBinary, startBinary } from '../support/binary';
import pkg from '../../package.json' with { type: 'json' };

const RELEASE_DIR = resolve(import.meta.dir, '../../dist/release');
const ARTIFACT = join(RELEASE_DIR, 'cpd-linux-arm64');
const QEMU = ['qemu-aarch64-static', '-L', '/usr/aarch64-linux-gnu'];

describe('cpd-linux-arm64 under qemu', () => {
  let cpd: RunningBinary;
  beforeAll(async () => {
    cpd = await startBinary({ binary: QEMU[0], args: [...QEMU.slice(1), ARTIFACT, 'serve'], readyTimeoutMs: 300_000 });
  }, 310_000);
  afterAll(async () => {
    expect(await cpd.stop()).toBe(0);
  }, 60_000);

  test('SHA256SUMS lists the artifact with its digest', async () => {
    const sums = await Bun.file(join(RELEASE_DIR, 'SHA256SUMS')).text();
    const digest = new Bun.CryptoHasher('sha256').update(await Bun.file(ARTIFACT).arrayBuffer()).digest('hex');
    expect(sums).toContain(`${digest}  cpd-linux-arm64\n`);
  });

  test('version names the version, the commit and the target', async () => {
    const proc = Bun.spawn([...QEMU, ARTIFACT, 'version'], { stdout: 'pipe', stderr: 'pipe' });
    const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(code).toBe(0);
    expect(out.trim()).toMatch(new RegExp(`^cpd ${pkg.version.replaceAll('.', '\\.')} \\(commit [0-9a-f]{7,40}, linux-arm64\\)$`));
  });

  test('healthz, then register and log in on the embedded database (argon2 addon for arm64)', async () => {
    expect(await (await fetch(`${cpd.url}/healthz`)).json()).toEqual({ status: 'ok' });
    const credentials = { email: 'arm64@example.com', password: 'long enough password' };
    const post = (path: string, body: unknown) =>
      fetch(`${cpd.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post('/api/auth/register', credentials)).status).toBe(201);
    const login = await post('/api/auth/login', { identifier: credentials.email, password: credentials.password });
    expect(login.status).toBe(200);
    const { token } = (await login.json()) as { token: string };
    const me = await fetch(`${cpd.url}/api/auth/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(((await me.json()) as { email: string }).email).toBe(credentials.email);
    const wrong = await post('/api/auth/login', { identifier: credentials.email, password: 'not the password' });
    expect(wrong.status).toBe(401);
  }, 60_000);
});
