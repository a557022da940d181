/**
 * Password hashing: argon2id through @node-rs/argon2 at the OWASP parameters (its own default
 * memory is 4 MiB in some versions, so they are always passed). hash/verify run on the native
 * thread pool and return promises: the event loop never waits for them.
 *
 * At most (CPU cores - 1) of them run at once, so a burst of logins queues instead of taking
 * every core from the event loop (and memory stays bounded at 19 MiB per running hash).
 */
import { availableParallelism } from 'node:os';
import { Algorithm, hash, parseOptions, verify } from '@node-rs/argon2';
import pLimit from 'p-limit';

/** OWASP argon2id parameters: m = 19 MiB, t = 2, p = 1. */
export const ARGON2_OPTIONS = { algorithm: Algorithm.Argon2id, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

const slots = pLimit(Math.max(1, availableParallelism() - 1));

export const hashPassword = (password: string) => slots(() => hash(password, ARGON2_OPTIONS));

/** False for a wrong password and for a hash that does not parse (never throws on bad input). */
export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await slots(() => verify(passwordHash, password));
  } catch {
    return false;
  }
}

/** True when the stored hash was made with another algorithm or weaker parameters than today's. */
export function needsRehash(passwordHash: string): boolean {
  try {
    const o = parseOptions(passwordHash);
    return (
      o.algorithm !== ARGON2_OPTIONS.algorithm ||
      o.memoryCost < ARGON2_OPTIONS.memoryCost ||
      o.timeCost < ARGON2_OPTIONS.timeCost ||
      o.parallelism !== ARGON2_OPTIONS.parallelism
    );
  } catch {
    return true;
  }
}

/**
 * A hash of a random password at today's parameters, made once per process: an unknown
 * identifier is verified against it so it costs the same time as a wrong password.
 */
let dummy: Promise<string> | null = null;
export const dummyHash = () => (dummy ??= hashPassword(crypto.randomUUID()));
