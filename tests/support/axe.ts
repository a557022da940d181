/**
 * axe-core in the page under test: the serious and critical accessibility violations it finds. The
 * page's context needs `bypassCSP: true`, as the console's script policy refuses the injected tool.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

const AXE_SOURCE = readFileSync(join(import.meta.dir, '../../node_modules/axe-core/axe.min.js'), 'utf8');

/** The serious and critical axe-core violations on the page as it is now, as "rule: target" lines. */
export async function axeViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.addScriptTag({ content: AXE_SOURCE });
  const found = await page.evaluate(async () => {
    // The page's globals, typed here without the DOM library.
    const { axe, document } = globalThis as unknown as {
      axe: {
        run(
          context: unknown,
          options: unknown,
        ): Promise<{ violations: Array<{ id: string; impact: string; nodes: Array<{ target: string[] }> }> }>;
      };
      document: unknown;
    };
    const { violations } = await axe.run(document, { resultTypes: ['violations'] });
    return violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')}`));
  });
  return found.map((line) => `${page.url()} ${line}`);
}
