/**
 * The README's tagged code blocks, for tests that use them as written: a fence's info string names
 * it (```sh codex, ```sh claude-code), and the README writes `http://localhost:8080` for the site
 * and `bfvk-…` for a key, which a test replaces with its own.
 */
import { expect } from 'bun:test';
import { join } from 'node:path';

const ROOT = join(import.meta.dir, '../..');
export const README_SITE = 'http://localhost:8080';
export const README_KEY = 'bfvk-…';

/** The body of the README's fence with this info string. */
export async function readmeBlock(info: string): Promise<string> {
  const readme = await Bun.file(join(ROOT, 'README.md')).text();
  const m = readme.match(new RegExp(`^\`\`\`${info}\\n([\\s\\S]*?)^\`\`\`$`, 'm'));
  if (!m) throw new Error(`README has no \`\`\`${info} block`);
  return m[1]!;
}

/** The variables a ```sh block of the README exports, run by bash for this site and key. */
export async function readmeEnv(info: string, site: string, key: string): Promise<Record<string, string>> {
  const block = (await readmeBlock(info)).replaceAll(README_SITE, site).replaceAll(README_KEY, key);
  const names = [...block.matchAll(/^export (\w+)=/gm)].map((m) => m[1]!);
  const proc = Bun.spawn(['bash', '-c', `${block}\n${names.map((n) => `printf '%s\\0' "$${n}"`).join('\n')}`], { stdout: 'pipe', env: { PATH: process.env.PATH! } });
  const values = (await new Response(proc.stdout).text()).split('\0');
  expect(await proc.exited).toBe(0);
  return Object.fromEntries(names.map((n, i) => [n, values[i]!]));
}
