/** Factories that build real data through the modules' own services. */
import { randomBase62 } from '../../src/platform/ids';
import type { TestApp } from './app';

export async function makeUser(t: Pick<TestApp, 'services'>, opts: { admin?: boolean; email?: string; password?: string; phone?: string } = {}) {
  const password = opts.password ?? `pw-${randomBase62(12)}`;
  const email = opts.email ?? `user-${randomBase62(8).toLowerCase()}@example.com`;
  const user = await t.services.accounts.createUser({ email, password, phone: opts.phone ?? null, isAdmin: opts.admin ?? false });
  const { token } = await t.services.accounts.createSession(user.id);
  return { ...user, email, password, token };
}

export async function makeApiKey(t: Pick<TestApp, 'services'>, userId: string, name = 'test key') {
  return t.services.accounts.createApiKey(userId, name);
}
