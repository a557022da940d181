/** Where runtimes, bundles, logs and the supervisor's state file live under DATA_DIR. */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeComponent } from './runtime.platform';

export const runtimesDir = (dataDir: string) => join(dataDir, 'runtimes');
export const componentDir = (dataDir: string, component: RuntimeComponent) => join(runtimesDir(dataDir), component);
export const currentLink = (dataDir: string, component: RuntimeComponent) => join(componentDir(dataDir, component), 'current');
export const previousLink = (dataDir: string, component: RuntimeComponent) => join(componentDir(dataDir, component), 'previous');
export const bundlesDir = (dataDir: string) => join(dataDir, 'bundles');
export const logsDir = (dataDir: string) => join(dataDir, 'logs');
export const stateFile = (dataDir: string) => join(runtimesDir(dataDir), 'state.json');

/** First file called `name` under the installed `current` version (archives may nest a folder). */
export function findInstalledFile(dataDir: string, component: RuntimeComponent, name: string): string | null {
  const root = currentLink(dataDir, component);
  return existsSync(root) ? findFile(root, name, 3) : null;
}

function findFile(dir: string, name: string, depth: number): string | null {
  const entries = readdirSync(dir, { withFileTypes: true });
  const hit = entries.find((e) => e.name === name && !e.isDirectory());
  if (hit) return join(dir, hit.name);
  if (depth === 0) return null;
  for (const e of entries) {
    if (!e.isDirectory()) continue;
    const found = findFile(join(dir, e.name), name, depth - 1);
    if (found) return found;
  }
  return null;
}
