/**
 * Password hashing: argon2id through @node-rs/argon2 at the OWASP parameters (its own default
 * memory is 4 MiB in some versions, so they are always passed). hash/verify run on the native
 * thread pool and return promises: the event loop never waits for them.
 *
 * At most (CPU cores - 1) of them run at once, so a burst of logins queues instead of taking
 * every core from the event loop (and memory stays bounded at 19 MiB per running hash).
 *
 * The native addon loads at the first hash, not at start: in the compiled binary loading it
 * (unpacking the .node file, checking the libc, dlopen) took 3 ms of every `cpd serve` start.
 */
import { availableParallelism } from 'node:os';
import type { Algorithm } from '@node-rs/argon2';
import pLimit from 'p-limit';

/** The addon's Algorithm.Argon2id: a const enum, whose value a type import lets the compiler check. */
const ARGON2ID: Algorithm.Argon2id = 2;

/** OWASP argon2id parameters: m = 19 MiB, t = 2, p = 1. */
export const ARGON2_OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

let addon: Promise<typeof import('@node-rs/argon2')> | null = null;
const argon2 = () => (addon ??= import('@node-rs/argon2'));

const slots = pLimit(Math.max(1, availableParallelism() - 1));

export const hashPassword = async (password: string) => {
  const { hash } = await argon2();
  return slots(() => hash(password, ARGON2_OPTIONS));
};

/** False for a wrong password and for a hash that does not parse (never throws on bad input). */
export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    const { verify } = await argon2();
    return await slots(() => verify(passwordHash, password));
  } catch {
    return false;
  }
}

/** True when the stored hash was made with another algorithm or weaker parameters than today's. */
export async function needsRehash(passwordHash: string): Promise<boolean> {
  try {
    const o = (await argon2()).parseOptions(passwordHash);
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
