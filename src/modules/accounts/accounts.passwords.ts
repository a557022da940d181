/**
 * Password hashing: argon2id through @node-rs/argon2 at the OWASP parameters (its own default
 * memory is 4 MiB in some versions, so they are always passed). hash/verify run on the native
 * thread pool and return promises: the event loop never waits for them.
 *
 * At most (CPU cores - 1) of them run at once, so a burst of logins queues instead of taking
 * every core from the event loop (and memory stays bounded at 19 MiB per running hash).
 *
 * The native addon loads at the first use, not at import: in the compiled binary loading it
 * (unpacking the .node file, checking the libc, dlopen) takes 3 ms, which `cpd serve` spends
 * while it waits for PostgreSQL instead of on its start's critical path (`loadPasswordHashing`).
 */
import { availableParallelism, tmpdir } from 'node:os';
import type { Algorithm } from '@node-rs/argon2';
import pLimit from 'p-limit';
import { FatalError } from '../../platform/errors';

/** The addon's Algorithm.Argon2id: a const enum, whose value a type import lets the compiler check. */
const ARGON2ID: Algorithm.Argon2id = 2;

/** OWASP argon2id parameters: m = 19 MiB, t = 2, p = 1. */
export const ARGON2_OPTIONS = { algorithm: ARGON2ID, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;

type Argon2 = typeof import('@node-rs/argon2');
let addon: Promise<Argon2> | null = null;

/**
 * The addon, loaded once. A compiled binary unpacks it into the temporary directory and runs it
 * from there: a TMPDIR that is missing, read-only or mounted noexec gets a message an operator
 * can act on, which stops a command with exit 2 (and the next call tries again).
 */
function argon2(): Promise<Argon2> {
  addon ??= import('@node-rs/argon2').catch((err: Error) => {
    addon = null;
    // The loader's own message blames npm; the system's reason (no such file, noexec) is in the
    // causes it chains, one per binding it tried.
    const messages: string[] = [];
    for (let e: unknown = err; e instanceof Error && messages.length < 10; e = e.cause) messages.push(e.message);
    const reason = /cannot open shared object file[^:]*|failed to map segment[^:]*|operation not permitted|permission denied/i.exec(messages.join('\n'))?.[0];
    throw new FatalError(`cannot load the password hasher: argon2's native addon runs from TMPDIR (${tmpdir()}), which must exist, be writable and allow executing files${reason ? ` (${reason})` : ''}`, 2);
  });
  return addon;
}

/** `cpd serve` awaits this before it listens, so a hasher that cannot load fails the start, not every login. */
export async function loadPasswordHashing(): Promise<void> {
  await argon2();
}

const slots = pLimit(Math.max(1, availableParallelism() - 1));

export const hashPassword = async (password: string) => {
  const { hash } = await argon2();
  return slots(() => hash(password, ARGON2_OPTIONS));
};

/** False for a wrong password and for a hash that does not parse (never throws on bad input). */
export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  const { verify } = await argon2(); // a hasher that cannot load is an error, not a wrong password
  try {
    return await slots(() => verify(passwordHash, password));
  } catch {
    return false;
  }
}

/** True when the stored hash was made with another algorithm or weaker parameters than today's. */
export async function needsRehash(passwordHash: string): Promise<boolean> {
  const { parseOptions } = await argon2();
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
