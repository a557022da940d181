import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { Algorithm, hash, parseOptions } from '@node-rs/argon2';
import { sql } from 'drizzle-orm';
import { createAccountsService, type AccountsService } from '../../../src/modules/accounts';
import { ARGON2_OPTIONS, dummyHash, hashPassword, needsRehash, verifyPassword } from '../../../src/modules/accounts/accounts.passwords';
import { normalizePhone, phoneSpellings } from '../../../src/modules/accounts/accounts.service';
import { sha256Hex } from '../../../src/platform/crypto';
import { AppError } from '../../../src/platform/errors';
import { createTestContext, type TestContext } from '../../support/app';
import { DB_KINDS } from '../../support/db';

const meta = { address: '192.0.2.1', userAgent: 'test' };

async function appErrorKind(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    if (err instanceof AppError) return err.kind;
    throw err;
  }
  return 'no error';
}

describe('passwords', () => {
  test('argon2id at m=19456 KiB, t=2, p=1', async () => {
    const o = parseOptions(await hashPassword('a password'));
    expect(o).toMatchObject({ algorithm: Algorithm.Argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 });
    expect(parseOptions(await dummyHash())).toMatchObject({ memoryCost: ARGON2_OPTIONS.memoryCost, timeCost: ARGON2_OPTIONS.timeCost });
  });

  test('hashing leaves the event loop free', async () => {
    // Turns of the event loop while a hash runs: a hash on the event loop would end before the
    // first (a 1 ms timer, as this counted before, could miss a 6 ms hash on a fast machine).
    let done = false;
    const hashing = hashPassword('a password').then(() => {
      done = true;
    });
    let turns = 0;
    while (!done) {
      await new Promise((r) => setImmediate(r));
      turns++;
    }
    await hashing;
    expect(turns).toBeGreaterThan(1);
  });

  test('needsRehash for weaker parameters or another algorithm; verify never throws', async () => {
    expect(await needsRehash(await hashPassword('x'))).toBe(false);
    expect(await needsRehash(await hash('x', { algorithm: Algorithm.Argon2id, memoryCost: 4096, timeCost: 3, parallelism: 1 }))).toBe(true);
    expect(await needsRehash(await hash('x', { algorithm: Algorithm.Argon2i, memoryCost: 19_456, timeCost: 2, parallelism: 1 }))).toBe(true);
    expect(await needsRehash('not a hash')).toBe(true);
    expect(await verifyPassword('not a hash', 'x')).toBe(false);
  });

  test('phone numbers are normalized', () => {
    expect(normalizePhone('+1 (555) 010-2000')).toBe('+15550102000');
    expect(normalizePhone('86.10.1234.5678')).toBe('861012345678');
    expect(normalizePhone('call me')).toBeNull();
    expect(normalizePhone('123')).toBeNull();
    // The China site spells a bare mainland mobile number as phone codes do (E.164); elsewhere it stays as typed.
    expect(normalizePhone('138 0013 8000', 'cn')).toBe('+8613800138000');
    expect(normalizePhone('13800138000', 'intl')).toBe('13800138000');
    expect(phoneSpellings('+8613800138000')).toEqual(['+8613800138000', '8613800138000', '13800138000']);
  });
});

for (const kind of DB_KINDS) {
  describe(`accounts service (${kind})`, () => {
    let tc: TestContext;
    let accounts: AccountsService;
    beforeAll(async () => {
      tc = await createTestContext(kind);
      accounts = createAccountsService(tc.ctx);
    });
    afterAll(() => tc.close());

    test('createUser validates and refuses a taken email in any case', async () => {
      const user = await accounts.createUser({ email: ' Mixed@Example.com ', password: 'password one' });
      expect(user).toEqual({ id: expect.stringMatching(/^usr_/), email: 'Mixed@Example.com' });
      expect(await appErrorKind(accounts.createUser({ email: 'mixed@example.COM', password: 'password two' }))).toBe('conflict');
      expect(await appErrorKind(accounts.createUser({ email: 'no-at-sign', password: 'password two' }))).toBe('invalid');
      expect(await appErrorKind(accounts.createUser({ email: 'b@example.com', password: 'short' }))).toBe('invalid');
      expect(await appErrorKind(accounts.createUser({ email: 'b@example.com', password: 'long enough', phone: 'x' }))).toBe('invalid');
      expect(await accounts.getUser(user.id)).toEqual(user);
      expect(await accounts.getUser('usr_missing')).toBeNull();
      expect(await accounts.emailsOf([user.id, 'usr_missing'])).toEqual(new Map([[user.id, 'Mixed@Example.com']]));
      expect(await accounts.emailsOf([])).toEqual(new Map());
    });

    test('session tokens are 256 random bits stored only as SHA-256', async () => {
      const user = await accounts.createUser({ email: 'tokens@example.com', password: 'password one' });
      const { token, session } = await accounts.createSession(user.id);
      expect(Buffer.from(token, 'base64url')).toHaveLength(32);
      const rows = await tc.ctx.database.query<Record<string, unknown>>(sql`select * from sessions where id = ${session.id}`);
      expect(rows[0]!.token_hash).toBe(sha256Hex(token));
      expect(JSON.stringify(rows)).not.toContain(token);
      expect((await accounts.resolver.callerForSession(token))?.userId).toBe(user.id);
    });

    test('a hash with older parameters is upgraded at the next successful login, not at a failed one', async () => {
      const user = await accounts.createUser({ email: 'old@example.com', password: 'old password' });
      const weak = await hash('old password', { algorithm: Algorithm.Argon2id, memoryCost: 4096, timeCost: 1, parallelism: 1 });
      await tc.ctx.database.query(sql`update users set password_hash = ${weak} where id = ${user.id}`);
      const stored = async () => (await tc.ctx.database.query<{ password_hash: string }>(sql`select password_hash from users where id = ${user.id}`))[0]!.password_hash;

      expect(await appErrorKind(accounts.login({ identifier: 'old@example.com', password: 'wrong password' }, meta))).toBe('unauthorized');
      expect(await stored()).toBe(weak);
      const result = await accounts.login({ identifier: 'old@example.com', password: 'old password' }, meta);
      expect('token' in result).toBe(true);
      const upgraded = await stored();
      expect(upgraded).not.toBe(weak);
      expect(parseOptions(upgraded)).toMatchObject({ memoryCost: 19_456, timeCost: 2 });
      expect('token' in (await accounts.login({ identifier: 'old@example.com', password: 'old password' }, meta))).toBe(true);
    });

    test('API keys: bfvk- + 40 base62, prefix is 12 characters, only the hash is stored', async () => {
      const user = await accounts.createUser({ email: 'keys@example.com', password: 'password one' });
      const key = await accounts.createApiKey(user.id, 'k');
      expect(key.key).toMatch(/^bfvk-[0-9A-Za-z]{40}$/);
      expect(key.prefix).toBe(key.key.slice(0, 12));
      const rows = await tc.ctx.database.query<Record<string, unknown>>(sql`select * from api_keys where id = ${key.id}`);
      expect(rows[0]!.key_hash).toBe(sha256Hex(key.key));
      expect(JSON.stringify(rows)).not.toContain(key.key);
      expect((await accounts.resolver.callerForKey(key.key))?.keyId).toBe(key.id);
      await accounts.revokeApiKey(user.id, key.id);
      expect(await accounts.resolver.callerForKey(key.key)).toBeNull();
      expect(await appErrorKind(accounts.revokeApiKey(user.id, key.id))).toBe('not_found');
    });
  });
}
